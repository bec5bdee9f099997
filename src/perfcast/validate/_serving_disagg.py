"""Disaggregated serving points replayed through `serve.simulate_disaggregated`.

The points (validate/data/serving_disagg_points.csv, scripts/build_serving_points.py) are
AIConfigurator's measured prefill/decode-disaggregated runs (TensorRT-LLM and SGLang on
Dynamo): `prefill_workers` workers of `prefill_tp` x `prefill_dp` GPUs, `decode_workers` of
`decode_tp` x `decode_dp`, experts over `*_ep` ranks, at most `*_batch` sequences per
attention-DP rank; a benchmark client keeps `concurrency` requests in flight.

Each pool is the `PoolLayout` a user writes (`perfcast serve --disagg-prefill
'1x(tp1,dp8,ep8,batch64)'`): every attention-DP rank of a worker is a replica of its pool
(behind the pool's router), as in the aggregated replay (`_serving_sim`). The closed loop
couples both pools (a client's next request starts when the decode pool finishes its last):
`serve.simulate_disaggregated` runs both pools as one simulation, the fixed point of
open-loop runs (its module docstring). Engine settings follow the aggregated replay (stated
there, not fitted): TensorRT-LLM pools run `vllm-v1`, SGLang pools `vllm-v0`; CPU scheduling
overlapped with the GPU step; one step model per pool deployment whatever the point's batch
limit (`GRID_BATCH`).
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import numpy as np
import pandas as pd

from perfcast.kernels import ExecutionTimeModel
from perfcast.serve import (
    ServeConfig,
    Workload,
    make_workload,
    simulate_disaggregated,
)
from perfcast.serve._disagg import PoolLayout, decode_pool
from perfcast.validate._serving import GRID_BATCH
from perfcast.validate._serving_sim import (
    ROUNDS,
    benchmark_lengths,
    cached_step_model,
    engine_settings,
)

__all__ = ["disagg_point", "load_disagg_points"]


def load_disagg_points() -> pd.DataFrame:
    """The shipped measured disaggregated points, one row per (deployment, isl, osl,
    concurrency)."""
    path = resources.files("perfcast.validate") / "data" / "serving_disagg_points.csv"
    with path.open("rb") as f:
        return pd.read_csv(f, keep_default_na=False, na_values=[""])


def pool_layout(point: pd.Series, pool: str) -> PoolLayout:
    """The point's `pool` ('prefill' or 'decode') as a user writes it."""
    return PoolLayout(workers=int(point[f"{pool}_workers"]), tp=int(point[f"{pool}_tp"]),
                      ep=int(point[f"{pool}_ep"]), attention_dp=int(point[f"{pool}_dp"]),
                      max_batch=int(point[f"{pool}_batch"]))


def _pool(point: pd.Series, pool: str, stack: str | None = None) -> ServeConfig:
    """One pool's config: the aggregated replay's engine settings (kernels per `stack`) on
    the pool's layout."""
    return pool_layout(point, pool).config(ServeConfig(**engine_settings(point, stack)))


def _grid(pool: ServeConfig) -> ServeConfig:
    """The config a pool's step model is built for: its own with room for GRID_BATCH
    sequences, so the points of one deployment (whose batch limits differ) share one step
    model, as the aggregated replay's points do (`_serving_sim.engine_point`): building it
    and pricing its grids is most of a replay's cost."""
    return ServeConfig(**(pool.model_dump() | {"max_batch": max(GRID_BATCH, pool.max_batch)}))


@cache
def _lengths(point_key: tuple, n: int, conc: int) -> tuple[np.ndarray, np.ndarray]:
    point = pd.Series(dict(point_key))
    w = make_workload(n, arrival="closed_loop", concurrency=conc, max_tokens=None, seed=0,
                      **benchmark_lengths(point))
    return w.prompt_tokens, w.output_tokens


def disagg_point(point: pd.Series, time_model: ExecutionTimeModel | None = None,
                 stack: str | None = None) -> tuple[float, float]:
    """(mean TTFT, mean TPOT) in seconds of the point's closed-loop benchmark, simulated on
    its prefill and decode pools (module docstring); kernels priced per `stack`
    (`perfcast.validate._serving.point_stack`; None: the shipped default calibration)."""
    conc = int(point["concurrency"])
    n = ROUNDS * conc
    key = tuple(sorted((k, point[k]) for k in ("isl", "osl", "silicon_data_source")))
    prompt, output = _lengths(key, n, conc)
    prefill, decode = _pool(point, "prefill", stack), decode_pool(_pool(point, "decode", stack))
    models = {"prefill_step_model": cached_step_model(_grid(prefill), time_model),
              "decode_step_model": cached_step_model(_grid(decode), time_model)}
    res = simulate_disaggregated(prefill, decode, Workload(np.zeros(n), prompt, output, conc),
                                 **models)
    r = res.requests
    return float(r["ttft_s"].mean()), float(r["tpot_s"].dropna().mean())
