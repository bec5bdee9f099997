"""One request (or a static batch) end to end: prefill, then token-by-token decode."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from perfcast.comm import CollectiveModel, default_collective_model
from perfcast.compose._context_parallel import (
    ContextParallelCost,
    check_cp,
    cp_decode_context,
    cp_prefill_batch,
    cp_tokens_per_rank,
    decode_combine,
    kv_hop_bytes,
    ring_prefill,
)
from perfcast.compose._host import host_overhead_s
from perfcast.compose._step import Execution, StepForecast, step_times
from perfcast.compose._vision import vision_step, with_vision_weights
from perfcast.errors import InputError
from perfcast.kernels import ExecutionTimeModel, default_time_model
from perfcast.ops import Batch, MemoryFootprint, inference_memory, step_ops
from perfcast.ops._vision import vision_encoder_spec
from perfcast.specs import Cluster, ModelSpec, ParallelPlan, Precision, cuda_total_bytes

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
    vision: StepForecast | None = None  # image encoding + projector, before the prefill
    image_tokens: int = 0  # tokens the images add to each prompt
    context_parallel: ContextParallelCost | None = None  # cp > 1 only

    @property
    def vision_encode_s(self) -> float:
        return self.vision.time_s if self.vision is not None else 0.0

    def intervals_s(self) -> dict[str, tuple[float, float] | None]:
        """90% intervals of TTFT, TPOT and end-to-end latency: each step's kernel-tier
        interval, decode's relative width applied to the mean decode step."""
        def scaled(step: StepForecast | None, value: float | None):
            if step is None or value is None or step.interval_s is None or not step.time_s:
                return None
            low, high = step.interval_s
            return (value * low / step.time_s, value * high / step.time_s)

        ttft = scaled(self.prefill, self.ttft_s)
        if self.vision is not None:  # TTFT = encoding + prefill: the two intervals add
            pre = scaled(self.prefill, self.prefill.time_s)
            vis = self.vision.interval_s
            ttft = None if pre is None or vis is None else (pre[0] + vis[0], pre[1] + vis[1])
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
        if self.vision is not None:
            parts.insert(0, self.vision.by("family").assign(phase="vision_encode"))
        if self.decode is not None and self.decode_steps:
            d = self.decode.by("family").assign(phase="decode")
            d["total_s"] *= self.tpot_s * self.decode_steps / max(self.decode.time_s, 1e-30)
            parts.append(d)
        out = pd.concat(parts, ignore_index=True)
        out["share"] = out["total_s"] / self.e2e_s
        return out[["phase", "family", "total_s", "share"]]


def _check_fits(memory: MemoryFootprint, cluster: Cluster, plan: ParallelPlan) -> None:
    capacity = cuda_total_bytes(cluster.device)[0]
    if memory.total_bytes > capacity:
        need = memory.total_bytes / 1e9
        cp = f", cp={plan.cp}" if plan.cp > 1 else ""
        raise InputError(
            "memory", f"needs {need:.1f} GB per GPU (weights {memory.weights_bytes / 1e9:.1f}, "
            f"KV {memory.kv_cache_bytes / 1e9:.1f}, activations "
            f"{memory.activation_bytes / 1e9:.1f}) but {cluster.device.name} has "
            f"{capacity / 1e9:.1f} GB CUDA-visible at tp={plan.tp}{cp}",
            "a larger --tp/--num-gpus/--cp, a narrower --dtype/--kv-dtype, or a smaller --batch")


def _validate(batch: int, prompt_tokens: int, output_tokens: int,
              model: ModelSpec) -> list[str]:
    """Refuse impossible lengths; notes for lengths a RoPE model was not trained on."""
    for name, value, low in (("batch", batch, 1), ("prompt_tokens", prompt_tokens, 1),
                             ("output_tokens", output_tokens, 0)):
        if value < low:
            raise InputError(name, f"must be >= {low}, got {value}", f">= {low}")
    limit = model.max_position_embeddings
    total = prompt_tokens + output_tokens
    if limit and model.position == "learned" and total > limit:
        raise InputError("prompt_tokens", f"prompt + output = {total} "
                         f"exceeds {model.name}'s {limit} learned positions", f"<= {limit}")
    used = prompt_tokens + max(output_tokens - 1, 0)  # the last token is never fed back
    if limit and model.position == "rope" and used > limit:
        # RoPE has no position table: the cost of longer contexts is the same shapes, so it is
        # priced; whether the model's quality holds there is another question (RoPE scaling).
        return [f"{used} positions (prompt + output - 1) exceed {model.name}'s "
                f"max_position_embeddings ({limit}); priced as a RoPE-scaled context"]
    return []


def _prefill(price, model: ModelSpec, cluster: Cluster, precision: Precision,
             plan: ParallelPlan, comm: CollectiveModel, batch: int, prompt: int,
             time_model: ExecutionTimeModel) -> tuple[StepForecast, dict]:
    """The prefill step (with CP: one rank's share of it plus the KV ring)."""
    if plan.cp == 1:
        return price(Batch.prefill(batch, prompt)), {}
    step = price(cp_prefill_batch(batch, prompt, plan.cp))
    return ring_prefill(step, model, precision, plan, cluster, comm, batch,
                        cp_tokens_per_rank(prompt, plan.cp), time_model)


def _memory(model: ModelSpec, precision: Precision, plan: ParallelPlan, batch: int,
            prompt: int, output_tokens: int) -> MemoryFootprint:
    """Per-GPU memory; with CP each rank keeps its 1/cp of the KV and of the prefill's
    activations, plus two KV blocks of the ring in flight (received, being sent)."""
    if plan.cp == 1:
        memory = inference_memory(model, precision, plan, batch, prompt + output_tokens, prompt)
    else:
        chunk = cp_tokens_per_rank(prompt, plan.cp)
        memory = inference_memory(model, precision, plan, batch,
                                  chunk + math.ceil(output_tokens / plan.cp), chunk)
        ring = 2 * kv_hop_bytes(model, precision, plan, batch, chunk)
        memory = replace(memory, activation_bytes=memory.activation_bytes + ring)
    return with_vision_weights(memory, model, precision, plan)


def forecast_inference(model: ModelSpec, cluster: Cluster, *, batch: int = 1,
                       prompt_tokens: int, output_tokens: int,
                       precision: Precision | None = None, plan: ParallelPlan | None = None,
                       execution: Execution | str = Execution.CUDA_GRAPH,
                       host: str = "vllm-v0",
                       time_model: ExecutionTimeModel | None = None,
                       images: int = 0,
                       comm_model: CollectiveModel | None = None,
                       dispatch_s: float | None = None,
                       step_host_s: float = 0.0,
                       decode_host_s: float = 0.0,
                       host_spread: tuple[float, float] = (1.0, 1.0),
                       batch_ops: Callable[[Batch], pd.DataFrame] | None = None
                       ) -> InferenceForecast:
    """TTFT, TPOT, end-to-end latency and memory of `batch` identical requests run together.

    The first output token comes from the prefill step; each further token is one decode step
    over a context one token longer than the last. `images` per request (multimodal models)
    are encoded first and add `vision.image_tokens` each to the prompt; TTFT includes the
    encoding. `plan.cp` > 1 splits each prompt over a context-parallel group (see
    compose/_context_parallel.py); cp = 1 is the plain forecast. `dispatch_s` is the host cost
    of one eager kernel launch (the software stack's; None: compose's default) and
    `step_host_s` host seconds per step beyond the engine profile `host`, and
    `decode_host_s` more per decode step (HF generate()'s per-token bookkeeping);
    `host_spread` widens the intervals by other hosts' range of host time (step_time).
    `batch_ops` turns each step's Batch into its op table (default: the serving engine's
    `step_ops`; an eager PyTorch stack passes its module graph, `ops.eager_batch_ops`).
    """
    precision = precision or Precision()
    plan = plan or ParallelPlan()
    time_model = time_model or default_time_model()
    comm = comm_model or default_collective_model()
    image_tokens = 0
    if images < 0:
        raise InputError("images", f"must be >= 0, got {images}", ">= 0")
    if images:
        vision_encoder_spec(model)  # refuses a model without a vision tower
        image_tokens = images * model.vision.image_tokens
    _validate(batch, prompt_tokens, output_tokens, model)
    prompt = prompt_tokens + image_tokens
    notes = _validate(batch, prompt, output_tokens, model)
    plan.check(model)
    check_cp(model, plan, cluster)
    if model.kind == "encoder" and output_tokens:
        notes.append(f"{model.name} is encoder-only: one forward pass, no generated tokens")
        output_tokens = 0
    memory = _memory(model, precision, plan, batch, prompt, output_tokens)
    _check_fits(memory, cluster, plan)

    batch_ops = batch_ops or (lambda b: step_ops(model, b, precision, plan))

    def price_all(batches: list[Batch], more_host_s: float = 0.0) -> list[StepForecast]:
        """Steps priced together: one kernel-model call for all of them (step_times)."""
        return step_times([batch_ops(b) for b in batches], cluster, execution,
                          host_overhead_s(host, batch, plan.tp) + step_host_s + more_host_s,
                          time_model, comm_model, dispatch_s, host_spread=host_spread)

    def price(b: Batch) -> StepForecast:
        return price_all([b])[0]

    vision = (vision_step(model, batch * images, precision, plan, cluster, execution,
                          time_model, comm_model) if images else None)
    prefill, ring = _prefill(price, model, cluster, precision, plan, comm, batch, prompt,
                             time_model)
    steps = max(output_tokens - 1, 0)
    decode, decode_total = None, 0.0
    if steps:
        first = 1 if model.kind == "encoder-decoder" else prompt + 1
        contexts = np.arange(first, first + steps)
        samples = np.unique(np.linspace(contexts[0], contexts[-1], DECODE_SAMPLES).round())
        enc = prompt if model.kind == "encoder-decoder" else 0
        priced = _decodes(price_all, decode_host_s, model, cluster, precision, plan, comm,
                          batch, [int(c) for c in samples], enc, time_model)
        decode_total = float(np.interp(contexts, samples, [p.time_s for p in priced]).sum())
        decode = priced[len(priced) // 2]
    ttft = prefill.time_s + (vision.time_s if vision is not None else 0.0)
    e2e = ttft + decode_total
    return InferenceForecast(
        ttft_s=ttft, tpot_s=decode_total / steps if steps else None, e2e_s=e2e,
        throughput_tok_s=batch * max(output_tokens, 0) / e2e if output_tokens else 0.0,
        memory=memory, prefill=prefill, decode=decode, decode_steps=steps, notes=notes,
        vision=vision, image_tokens=image_tokens,
        context_parallel=_cp_cost(plan, prompt, ring, decode))


def _decodes(price_all, host_s: float, model: ModelSpec, cluster: Cluster,
             precision: Precision, plan: ParallelPlan, comm: CollectiveModel, batch: int,
             contexts: list[int], enc: int, time_model: ExecutionTimeModel
             ) -> list[StepForecast]:
    """One decode step at each of `contexts` tokens, priced together (with CP: each over this
    rank's shard, plus the merge of the ranks' partial attention)."""
    if plan.cp == 1:
        return price_all([Batch.decode(batch, c, enc) for c in contexts], host_s)
    steps = price_all([Batch.decode(batch, cp_decode_context(c, plan.cp), enc)
                       for c in contexts], host_s)
    return [decode_combine(step, model, precision, plan, cluster, comm, batch, time_model)
            for step in steps]


def _cp_cost(plan: ParallelPlan, prompt: int, ring: dict,
             decode: StepForecast | None) -> ContextParallelCost | None:
    if plan.cp == 1:
        return None
    combine = 0.0
    if decode is not None:
        combine = float(decode.ops.loc[decode.ops["op"] == "cp_attn_combine", "total_s"].sum())
    return ContextParallelCost(cp=plan.cp, tokens_per_rank=cp_tokens_per_rank(prompt, plan.cp),
                               decode_combine_s=combine, **ring)
