"""One request (or a static batch) end to end: prefill, then token-by-token decode."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from perfcast.compose._host import host_overhead_s
from perfcast.compose._step import Execution, StepForecast, step_time
from perfcast.errors import InputError
from perfcast.kernels import ExecutionTimeModel
from perfcast.ops import Batch, MemoryFootprint, inference_memory, step_ops
from perfcast.specs import Cluster, ModelSpec, ParallelPlan, Precision

__all__ = ["InferenceForecast", "forecast_inference"]

# Decode step time is piecewise linear in context length (KV bytes grow linearly), so it is
# priced at this many evenly spaced steps and interpolated in between.
DECODE_SAMPLES = 17


@dataclass(frozen=True)
class InferenceForecast:
    ttft_s: float
    tpot_s: float | None
    e2e_s: float
    throughput_tok_s: float
    memory: MemoryFootprint
    prefill: StepForecast
    decode: StepForecast | None
    decode_steps: int
    notes: list[str] = field(default_factory=list)

    def intervals_s(self) -> dict[str, tuple[float, float] | None]:
        """90% intervals of TTFT, TPOT and end-to-end latency: each step's kernel-tier
        interval, decode's relative width applied to the mean decode step."""
        def scaled(step: StepForecast | None, value: float | None):
            if step is None or value is None or step.interval_s is None or not step.time_s:
                return None
            low, high = step.interval_s
            return (value * low / step.time_s, value * high / step.time_s)

        ttft = scaled(self.prefill, self.ttft_s)
        tpot = scaled(self.decode, self.tpot_s)
        e2e = None
        if ttft is not None:
            steps = self.decode_steps
            e2e = (ttft[0] + (tpot[0] * steps if tpot else 0.0),
                   ttft[1] + (tpot[1] * steps if tpot else 0.0))
        return {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e}

    def breakdown(self) -> pd.DataFrame:
        """Seconds per kernel family in prefill and in all decode steps together."""
        parts = [self.prefill.by("family").assign(phase="prefill")]
        if self.decode is not None and self.decode_steps:
            d = self.decode.by("family").assign(phase="decode")
            d["total_s"] *= self.tpot_s * self.decode_steps / max(self.decode.time_s, 1e-30)
            parts.append(d)
        out = pd.concat(parts, ignore_index=True)
        out["share"] = out["total_s"] / self.e2e_s
        return out[["phase", "family", "total_s", "share"]]


def _check_fits(memory: MemoryFootprint, cluster: Cluster, plan: ParallelPlan) -> None:
    capacity = cluster.device.hbm_capacity_bytes
    if memory.total_bytes > capacity:
        need = memory.total_bytes / 1e9
        raise InputError(
            "memory", f"needs {need:.1f} GB per GPU (weights {memory.weights_bytes / 1e9:.1f}, "
            f"KV {memory.kv_cache_bytes / 1e9:.1f}, activations "
            f"{memory.activation_bytes / 1e9:.1f}) but {cluster.device.name} has "
            f"{capacity / 1e9:.1f} GB at tp={plan.tp}",
            "a larger --tp/--num-gpus, a narrower --dtype/--kv-dtype, or a smaller --batch")


def _validate(batch: int, prompt_tokens: int, output_tokens: int, model: ModelSpec) -> None:
    for name, value, low in (("batch", batch, 1), ("prompt_tokens", prompt_tokens, 1),
                             ("output_tokens", output_tokens, 0)):
        if value < low:
            raise InputError(name, f"must be >= {low}, got {value}", f">= {low}")
    limit = model.max_position_embeddings
    if limit and model.position == "learned" and prompt_tokens + output_tokens > limit:
        raise InputError("prompt_tokens", f"prompt + output = {prompt_tokens + output_tokens} "
                         f"exceeds {model.name}'s {limit} learned positions", f"<= {limit}")


def forecast_inference(model: ModelSpec, cluster: Cluster, *, batch: int = 1,
                       prompt_tokens: int, output_tokens: int,
                       precision: Precision | None = None, plan: ParallelPlan | None = None,
                       execution: Execution | str = Execution.CUDA_GRAPH,
                       host: str = "vllm-v0",
                       time_model: ExecutionTimeModel | None = None) -> InferenceForecast:
    """TTFT, TPOT, end-to-end latency and memory of `batch` identical requests run together.

    The first output token comes from the prefill step; each further token is one decode step
    over a context one token longer than the last.
    """
    precision = precision or Precision()
    plan = plan or ParallelPlan()
    _validate(batch, prompt_tokens, output_tokens, model)
    plan.check(model)
    notes = []
    if model.kind == "encoder" and output_tokens:
        notes.append(f"{model.name} is encoder-only: one forward pass, no generated tokens")
        output_tokens = 0
    memory = inference_memory(model, precision, plan, batch, prompt_tokens + output_tokens,
                              prompt_tokens)
    _check_fits(memory, cluster, plan)

    def price(b: Batch) -> StepForecast:
        return step_time(step_ops(model, b, precision, plan), cluster, execution,
                         host_overhead_s(host, batch, plan.tp), time_model)

    prefill = price(Batch.prefill(batch, prompt_tokens))
    steps = max(output_tokens - 1, 0)
    decode, decode_total = None, 0.0
    if steps:
        first = 1 if model.kind == "encoder-decoder" else prompt_tokens + 1
        contexts = np.arange(first, first + steps)
        samples = np.unique(np.linspace(contexts[0], contexts[-1], DECODE_SAMPLES).round())
        enc = prompt_tokens if model.kind == "encoder-decoder" else 0
        priced = [price(Batch.decode(batch, int(c), enc)) for c in samples]
        decode_total = float(np.interp(contexts, samples, [p.time_s for p in priced]).sum())
        decode = priced[len(priced) // 2]
    e2e = prefill.time_s + decode_total
    return InferenceForecast(
        ttft_s=prefill.time_s, tpot_s=decode_total / steps if steps else None, e2e_s=e2e,
        throughput_tok_s=batch * max(output_tokens, 0) / e2e if output_tokens else 0.0,
        memory=memory, prefill=prefill, decode=decode, decode_steps=steps, notes=notes)
