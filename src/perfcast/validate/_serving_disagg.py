"""Disaggregated serving points replayed through `serve.simulate_disaggregated`.

The points (validate/data/serving_disagg_points.csv, scripts/build_serving_points.py) are
AIConfigurator's measured prefill/decode-disaggregated runs (TensorRT-LLM and SGLang on
Dynamo): `prefill_workers` workers of `prefill_tp` x `prefill_dp` GPUs, `decode_workers` of
`decode_tp` x `decode_dp`, experts over `*_ep` ranks, at most `*_batch` sequences per
attention-DP rank; a benchmark client keeps `concurrency` requests in flight.

Each attention-DP rank of a worker is a replica of its pool (behind the pool's router), as in
the aggregated replay (`_serving_sim`). The closed loop couples both pools (a client's next
request starts when the decode pool finishes its last), so it is solved as a fixed point of
open-loop runs: client slot k sends requests k, k + C, k + 2C, ..., each arriving when the
slot's previous one completed; arrivals from one run's completions feed the next run until
the mean TTFT and TPOT stop moving. Engine settings follow the
aggregated replay (stated there, not fitted): TensorRT-LLM pools run `vllm-v1`, SGLang pools
`vllm-v0`; CPU scheduling overlapped with the GPU step.
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
from perfcast.validate._serving_sim import (
    ROUNDS,
    benchmark_lengths,
    cached_step_model,
    engine_settings,
)

__all__ = ["disagg_point", "load_disagg_points"]

# Fixed-point sweeps (each one open-loop run of both pools) stop when mean TTFT and TPOT
# move less than TOLERANCE between sweeps: single arrival times keep jittering (batch
# boundaries shift), the means settle within 2-4 sweeps.
MAX_ITERATIONS, TOLERANCE = 8, 0.005


def load_disagg_points() -> pd.DataFrame:
    """The shipped measured disaggregated points, one row per (deployment, isl, osl,
    concurrency)."""
    path = resources.files("perfcast.validate") / "data" / "serving_disagg_points.csv"
    with path.open("rb") as f:
        return pd.read_csv(f, keep_default_na=False, na_values=[""])


def _pool(point: pd.Series, pool: str, stack: str | None = None) -> ServeConfig:
    """One pool's config: the aggregated replay's engine settings (kernels per `stack`) on
    the pool's layout."""
    dp = int(point[f"{pool}_dp"])
    return ServeConfig(**engine_settings(point, stack), tp=int(point[f"{pool}_tp"]), pp=1,
                       max_batch=int(point[f"{pool}_batch"]), ep=int(point[f"{pool}_ep"]),
                       attention_dp=dp, replicas=int(point[f"{pool}_workers"]) * dp)


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
    prefill, decode = _pool(point, "prefill", stack), _pool(point, "decode", stack)
    models = {"prefill_step_model": cached_step_model(prefill, time_model),
              "decode_step_model": cached_step_model(decode, time_model)}
    arrival, last = np.zeros(n), None
    for _ in range(MAX_ITERATIONS):
        order = np.argsort(arrival, kind="stable")
        res = simulate_disaggregated(prefill, decode,
                                     Workload(arrival[order], prompt[order], output[order]),
                                     **models)
        done = np.empty(n)
        done[order] = res.requests["completion_s"].to_numpy()
        arrival = np.concatenate([np.zeros(conc), done[:-conc]])
        means = np.array([res.requests["ttft_s"].mean(), res.requests["tpot_s"].mean()])
        if last is not None and np.all(np.abs(means / last - 1.0) <= TOLERANCE):
            break
        last = means
    r = res.requests
    return float(r["ttft_s"].mean()), float(r["tpot_s"].dropna().mean())
