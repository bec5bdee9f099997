"""The serve engine as a `validate_serving` callable: each measured point replayed as its
benchmark client ran it — `concurrency` requests kept in flight (closed loop), 10 x
concurrency requests in all — and the simulated requests' mean TTFT and TPOT returned.

The client matters as much as the server for TTFT: with identical lengths, requests that
start together finish together and the next ones arrive together (prefill waves); length
jitter desynchronises them. Rows from the InferenceMAX-style sweep (`source_file=2026-04-06`:
isl/osl 1k/1k, 1k/8k, 8k/1k) follow its published client recipe: vLLM `benchmark_serving`
on the random dataset with `--random-range-ratio 0.8` (lengths uniform in [0.8 L, L]) and
`--num-prompts` = 10 x concurrency. The other rows (AIConfigurator's gap-analysis sweeps)
publish no recipe; they are replayed with their fixed isl/osl and the same request count.
Both are stated assumptions, not fitted.

Engine settings per backend are what those servers run by default (stated, not fitted),
read from the backend stack's engine defaults (`perfcast.specs.Stack.engine`, the ones
`perfcast serve --stack` uses): vLLM V1 and TensorRT-LLM in-flight batching mix (chunked)
prefills into decode steps under one token budget (`vllm-v1`, 8192 tokens on these GPUs);
SGLang runs waiting prompts first, in prefill-only steps chunked to its chunked-prefill
size (8192 tokens on H100, 16384 on B200), decodes pausing meanwhile (mixed chunks are off
by default: `prefill-first`); `max_batch` = the point's concurrency,
and CPU scheduling overlapped with the GPU step (SGLang's and TensorRT-LLM's overlap
schedulers, vLLM's async scheduling), so host time counts only where it exceeds the step.
Steps with prefill tokens are dispatched from Python at the engine's
`Stack.host.prefill_dispatch_s` per kernel (decode-only steps replay CUDA graphs): fitted
on the diagnostic sample by scripts/fit_prefill_dispatch.py, the one value here fitted to
serving points.
KV memory as each engine sizes it at its default fraction (0.9): of the CUDA total for vLLM
and SGLang, of what the model leaves free for TensorRT-LLM (`perfcast.specs.KVBudget`).

MoE points run their measured layout (`point_layout`): attention TP `tp`, `dp` attention-DP
ranks (each a replica behind a round-robin router, as SGLang's and TensorRT-LLM's DP
attention balance requests), experts over `ep` ranks x moe_tp; the most loaded EP rank
carries ServeConfig's default `expert_skew` (chosen a priori, not fitted on these points).

Kernels: the shipped default calibration, or a stack's own tables through
`ServeConfig.stack` (the serve engine's `step_model_for`): `stack` as in
`perfcast.validate._serving.point_stack` ('backend': each point's own framework).
"""

from __future__ import annotations

from collections import OrderedDict

import pandas as pd

from perfcast.compose import ServingStepModel
from perfcast.kernels import ExecutionTimeModel
from perfcast.serve import ServeConfig, make_workload, simulate, step_model_for
from perfcast.specs import get_device, get_stack
from perfcast.validate._serving import (
    GRID_BATCH,
    kept_step_model,
    point_layout,
    point_precision,
    point_stack,
)

__all__ = ["RANGE_RATIO", "ROUNDS", "benchmark_lengths",
           "cached_step_model", "engine_point", "engine_settings"]

ROUNDS = 10  # requests per point = ROUNDS x concurrency (InferenceMAX's --num-prompts)
RANGE_RATIO = 0.8  # InferenceMAX's --random-range-ratio: lengths uniform in [0.8 L, L]
_RECIPE_SOURCE = "source_file=2026-04-06.csv"
_STEP_MODELS: OrderedDict[tuple, tuple[object, ServingStepModel]] = OrderedDict()


def engine_settings(point: pd.Series, stack: str | None = None) -> dict:
    """The ServeConfig fields every replay of a point shares (module docstring): model, GPU,
    precision, the scheduler and token budget its backend's engine defaults to on that GPU
    (`Stack.engine`, what `perfcast serve --stack <backend>` uses) and its KV memory rule
    (the engine that ran sized its KV cache, whichever tables price the kernels), overlapped
    host and its per-kernel cost of prefill steps (the engine's, likewise), context limit,
    the stack pricing its kernels (`point_stack`)."""
    backend = get_stack(point["backend"])
    tier = backend.engine.tier_on(get_device(point["device"]))
    isl, osl = int(point["isl"]), int(point["osl"])
    return {"model": point["model"], "gpu": point["device"],
            "max_batch_tokens": tier.max_batch_tokens, "scheduler": backend.engine.scheduler,
            "precision": point_precision(point), "host_overlap": True,
            "max_context": isl + osl, "stack": point_stack(point, stack),
            "kv_budget": backend.kv_budget,
            "prefill_dispatch_s": backend.host.prefill_dispatch_s}


def cached_step_model(config: ServeConfig, time_model: ExecutionTimeModel | None
                      ) -> ServingStepModel:
    """One step model per deployment, grid size and time model, kept (the most recently used
    `KEPT_STEP_MODELS`): its grids are the cost of a replay; under the config's host costs
    (`ServingStepModel.with_host`: the grids shared)."""
    key = (config.model, config.gpu, config.tp, config.pp, config.ep, config.attention_dp,
           config.precision, config.max_context, config.max_batch, config.stack,
           config.kernel_model, id(time_model))
    model = kept_step_model(_STEP_MODELS, key, time_model,
                            lambda: step_model_for(config, time_model))
    return model.with_host(config.prefill_dispatch, config.host_speed)


def _config(point: pd.Series, max_batch: int, stack: str | None = None,
            prefill_dispatch_s: float | None = None) -> ServeConfig:
    layout = point_layout(point)
    settings = engine_settings(point, stack)
    if prefill_dispatch_s is not None:
        settings["prefill_dispatch_s"] = prefill_dispatch_s
    return ServeConfig(**settings, tp=int(point["tp"]), pp=int(point["pp"]),
                       max_batch=max_batch, ep=layout["ep"], attention_dp=layout["dp"],
                       replicas=layout["dp"])


def benchmark_lengths(point: pd.Series) -> dict:
    """`make_workload` length arguments of the point's benchmark client (module docstring)."""
    isl, osl = int(point["isl"]), int(point["osl"])
    if _RECIPE_SOURCE in str(point.get("silicon_data_source", "")):
        return {"lengths": "uniform", "prompt_tokens": (int(RANGE_RATIO * isl), isl),
                "output_tokens": (int(RANGE_RATIO * osl), osl)}
    return {"lengths": "fixed", "prompt_tokens": isl, "output_tokens": osl}


def engine_point(point: pd.Series, time_model: ExecutionTimeModel | None = None,
                 stack: str | None = None, prefill_dispatch_s: float | None = None
                 ) -> tuple[float, float]:
    """(mean TTFT, mean TPOT) in seconds of the point's closed-loop benchmark, simulated;
    kernels priced per `stack` (module docstring; None: the shipped default calibration),
    prefill steps dispatched `prefill_dispatch_s` per kernel (None: the backend's stack's;
    scripts/fit_prefill_dispatch.py varies it)."""
    conc = int(point["concurrency"])
    workload = make_workload(ROUNDS * conc, arrival="closed_loop", concurrency=conc,
                             max_tokens=None, seed=0, **benchmark_lengths(point))
    per_rank = -(-conc // point_layout(point)["dp"])  # the router spreads the client's load
    # one step model for every concurrency
    grid = _config(point, max(GRID_BATCH, conc), stack, prefill_dispatch_s)
    result = simulate(_config(point, per_rank, stack, prefill_dispatch_s), workload,
                      step_model=cached_step_model(grid, time_model))
    s = result.summary()
    return float(s["ttft_s"]["mean"]), float(s["tpot_s"]["mean"])
