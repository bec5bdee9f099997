"""The serve engine as a `validate_serving` callable: each measured point replayed as the
benchmark client ran it — `concurrency` requests of `isl` / `osl` tokens kept in flight
(closed loop) — and the simulated requests' mean TTFT and TPOT returned.

Engine settings per backend are what those servers run by default (stated, not fitted):
continuous batching with chunked prefill mixed into decode steps under one token budget
(vLLM V1, SGLang, TensorRT-LLM in-flight batching), `max_batch` = the point's concurrency,
and CPU scheduling overlapped with the GPU step (SGLang's and TensorRT-LLM's overlap
schedulers, vLLM's async scheduling), so host time counts only where it exceeds the step.
"""

from __future__ import annotations

import pandas as pd

from perfcast.compose import ServingStepModel
from perfcast.kernels import ExecutionTimeModel
from perfcast.serve import ServeConfig, make_workload, simulate, step_model_for
from perfcast.validate._serving import point_precision

__all__ = ["BATCH_TOKEN_BUDGET", "ROUNDS", "engine_point"]

BATCH_TOKEN_BUDGET = 8192  # vLLM V1's default max_num_batched_tokens for online serving
ROUNDS = 4  # requests per point = ROUNDS x concurrency (benchmarks run several waves)
_STEP_MODELS: dict[tuple, tuple[object, ServingStepModel]] = {}


def _config(point: pd.Series, max_batch: int) -> ServeConfig:
    return ServeConfig(model=point["model"], gpu=point["device"], tp=int(point["tp"]),
                       pp=int(point["pp"]), scheduler="vllm-v1", max_batch=max_batch,
                       max_batch_tokens=max(BATCH_TOKEN_BUDGET, int(point["isl"]) // 8),
                       precision=point_precision(point), host_overlap=True,
                       max_context=int(point["isl"]) + int(point["osl"]))


def _step_model(point: pd.Series, time_model: ExecutionTimeModel | None) -> ServingStepModel:
    key = (point["model"], point["device"], int(point["tp"]), int(point["pp"]),
           point["precision"], int(point["isl"]) + int(point["osl"]), id(time_model))
    if key not in _STEP_MODELS:  # holding time_model keeps its id() unique
        config = _config(point, max(1024, int(point["concurrency"])))
        _STEP_MODELS[key] = (time_model, step_model_for(config, time_model))
    return _STEP_MODELS[key][1]


def engine_point(point: pd.Series, time_model: ExecutionTimeModel | None = None
                 ) -> tuple[float, float]:
    """(mean TTFT, mean TPOT) in seconds of the point's closed-loop benchmark, simulated."""
    conc = int(point["concurrency"])
    workload = make_workload(ROUNDS * conc, arrival="closed_loop", concurrency=conc,
                             lengths="fixed", prompt_tokens=int(point["isl"]),
                             output_tokens=int(point["osl"]), max_tokens=None)
    result = simulate(_config(point, conc), workload, step_model=_step_model(point,
                                                                               time_model))
    s = result.summary()
    return float(s["ttft_s"]["mean"]), float(s["tpot_s"]["mean"])
