"""Bytes one GPU holds while training: weights, gradients, optimizer state, activations,
communication buffers.

Model states (Rajbhandari et al. 2020, ZeRO, section 3.1, mixed-precision Adam): a 16-bit
compute copy of the weights (2 B/param; FP8 GEMMs add a 1 B fp8 copy, Transformer Engine),
16-bit gradients (2 B), and K = 12 B of optimizer state (fp32 master weights, momentum and
variance); fp32 training keeps 4 B weights, 4 B gradients and 8 B of moments. ZeRO-1 shards
the optimizer state over the data-parallel ranks, ZeRO-2 also the gradients, ZeRO-3/FSDP
also the weights. LoRA: the frozen base keeps its compute copy only; the adapters carry
all three states.

Activations per layer and micro-batch (Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models", section 4.1): 34 x s x b x h bytes for GPT-3's
shape in 16-bit, of which 10 sbh (norm inputs, the QKV and MLP inputs, two 1-byte dropout
masks) are replicated across TP ranks and 24 sbh split by them; sequence parallelism splits
the 10 sbh too; full recomputation keeps only each layer's 2 sbh input (/tp with SP) plus
one layer's working set. Counted here per stored tensor so the same accounting serves GQA,
gated MLPs, any FFN width, MoE experts and FP8 GEMM inputs (1 B). The attention kernel is
FlashAttention (what the kernel model prices), which stores no s x s scores: the 5as/h
term of the paper is replaced by the softmax statistics (4 B per head per token), so
selective recomputation — which the paper defines as dropping exactly that term — only
frees those statistics.

A stack that trains the eager HF graph (perfcast.compose.EagerGraph) differs twice: its loss
holds 12 B per logit at its backward (perfcast.ops.loss_peak_bytes_per_logit) against the
fused table's 4 B, and its gradients are allocated as backward frees the activations
(zero_grad(set_to_none=True), PyTorch's default since 2.0), so the peak holds the larger of
the two: `gradients` then counts only what they need beyond the activations.

What a plan may fill (`MemoryBudget`): the bytes the CUDA allocator can get
(perfcast.specs.cuda_total_bytes, the number every fit check reads), not the marketed
capacity; the CUDA total still holds the CUDA context, counted in `runtime`. The caching
allocator's fragmentation is a fraction of that held back (`allocator_reserve`), 0 by
default: PyTorch's default allocator loses 15% on average (up to 33%) under recomputation,
ZeRO and LoRA on A100-80GB (GMLake, Guo et al., ASPLOS 2024, arxiv.org/abs/2401.08156), but
expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, which NVIDIA's
Megatron-Bridge memory guide says most launch templates set,
docs.nvidia.com/nemo/megatron-bridge) remove most of it, and no published fraction carries
to them; the 216 MosaicML runs that ran leave 4.7% of headroom under this accounting.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perfcast.compose import DDP_BUCKET_BYTES
from perfcast.errors import InputError, from_validation_error
from perfcast.ops._memory import NCCL_BYTES, RUNTIME_BYTES
from perfcast.specs import (
    Device,
    ModelSpec,
    Precision,
    bytes_per_element,
    cuda_total_bytes,
    physical_memory_bytes,
)
from perfcast.train._memory_policy import TrainingMemoryPolicy, memory_policy
from perfcast.train._schedule import Schedule, held

__all__ = ["MEMORY_KINDS", "MemoryBudget", "activation_bytes_per_layer", "eager_step_memory",
           "nccl_bytes", "stage_memory", "state_bytes_per_param"]

MEMORY_KINDS = ("weights", "gradients", "optimizer", "activations", "comm_buffers", "runtime")

DROPOUT_MASK_BYTES = 1.0  # Korthikanti et al. 2022: one byte per element
LSE_BYTES = 4.0  # FlashAttention's fp32 log-sum-exp per head and query token
class MemoryBudget(BaseModel):
    """What part of one GPU's memory a training plan may fill (module docstring):
    `usable_bytes`, what the CUDA allocator can get (None: the device's shipped CUDA total,
    `perfcast.specs.cuda_total_bytes`), less `allocator_reserve` of it held by the caching
    allocator."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    usable_bytes: float | None = Field(None, gt=0, description="bytes the CUDA allocator "
                                       "can get on one GPU (torch.cuda.mem_get_info()[1]); "
                                       "None: the shipped measured total for the device")
    allocator_reserve: float = Field(0.0, ge=0.0, le=0.9, description="fraction of the "
                                     "usable bytes the caching allocator holds but cannot "
                                     "hand out (fragmentation); 0: expandable segments")

    def __init__(self, **data: Any):
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise from_validation_error(exc, "memory_budget.") from None

    def usable(self, device: Device) -> tuple[float, str]:
        """(CUDA-visible bytes, their source): the given ones, else the device's."""
        if self.usable_bytes is None:
            return cuda_total_bytes(device)
        return self.usable_bytes, "given"

    def budget_bytes(self, device: Device) -> float:
        """Bytes a plan may need per GPU and still fit: usable less the allocator reserve."""
        return self.usable(device)[0] * (1.0 - self.allocator_reserve)

    def check(self, device: Device) -> None:
        """Given usable bytes above the device's physical memory are refused."""
        top = physical_memory_bytes(device)
        if self.usable_bytes is not None and self.usable_bytes > top:
            raise InputError("memory_budget.usable_bytes", f"{self.usable_bytes:.4g} B exceeds "
                             f"{device.name}'s {top:.4g} B of physical memory",
                             f"<= {top:.4g}")

    def describe(self, device: Device) -> dict[str, Any]:
        """The budget as a result's inputs print it (bytes and the source of each)."""
        usable, source = self.usable(device)
        return {"physical_bytes": physical_memory_bytes(device), "usable_bytes": usable,
                "usable_source": source, "allocator_reserve": self.allocator_reserve,
                "budget_bytes": self.budget_bytes(device)}


def _kv_local(model: ModelSpec, tp: np.ndarray) -> np.ndarray:
    """KV width per GPU; KV heads are replicated when tp exceeds them."""
    return np.maximum(model.num_kv_heads // tp, 1) * model.head_dim


def activation_bytes_per_layer(model: ModelSpec, precision: Precision, tokens: ArrayLike,
                               tp: ArrayLike, sp: ArrayLike, moe: bool = False,
                               routed_rows: ArrayLike = 0.0,
                               expert_tp: ArrayLike = 1) -> dict[str, np.ndarray]:
    """Activation bytes one layer stores for its backward, for `tokens` tokens on one GPU:
    'replicated' (same on every TP rank; split by SP), 'sharded' (split by TP) and
    'lse' (FlashAttention statistics, freed by selective recomputation). MoE layers store
    each routed copy's expert inputs (`routed_rows` rows of width / expert_tp). Arguments
    may be arrays (one entry per plan)."""
    tokens, tp = np.asarray(tokens, dtype=float), np.asarray(tp, dtype=float)
    h = model.hidden_size
    a = bytes_per_element(precision.vector_math)  # tensors between kernels
    g = bytes_per_element(precision.activations)  # GEMM inputs (fp8 under FP8 GEMMs)
    replicated = (2 * a + 2 * g + 2 * DROPOUT_MASK_BYTES) * h * tokens
    attention = (a * (model.q_dim / tp + 2 * _kv_local(model, tp))
                 + g * model.attn_out_dim / tp) * tokens
    if moe:
        spec = model.moe
        inter = spec.expert_intermediate_size / expert_tp
        up = 2 * inter if model.gated_mlp else inter
        mlp = routed_rows * (g * h + a * up + g * inter)
        mlp += tokens * 4.0 * spec.num_experts  # fp32 router probabilities
        if spec.num_shared_experts:
            shared = spec.num_shared_experts * spec.expert_intermediate_size / tp
            mlp += tokens * (a * (2 if model.gated_mlp else 1) + g) * shared
    else:
        inter = model.intermediate_size / tp
        mlp = tokens * (a * (2 * inter if model.gated_mlp else inter) + g * inter)
    replicated = replicated / np.where(sp, tp, 1)
    lse = LSE_BYTES * model.num_heads / tp * tokens
    return {"replicated": replicated, "sharded": attention + mlp, "lse": lse}


def state_bytes_per_param(precision: Precision,
                          policy: TrainingMemoryPolicy | str | None = None) -> dict[str, float]:
    """Bytes per trainable parameter: compute copy, gradient, optimizer state under the
    memory policy (perfcast.train._memory_policy; None: amp, the module doc's accounting);
    'gathered' is what a parameter all-gather moves (the 16-bit copy, not the fp8 one);
    'distributed_optimizer' is 1.0 when the policy shards the optimizer state over dp at
    any ZeRO stage (Megatron's distributed optimizer), else 0.0."""
    spec = memory_policy(policy)
    return {**spec.bytes_per_param(precision),
            "distributed_optimizer": float(spec.distributed_optimizer)}


def nccl_bytes(group_size: np.ndarray) -> np.ndarray:
    """NCCL's buffers for one communicator of `group_size` GPUs (AIConfigurator's measured
    per-TP-group sizes; a group of more than 8 as one of 8; none for a group of one)."""
    g = np.minimum(np.asarray(group_size, dtype=int), 8)
    table = np.array([NCCL_BYTES.get(k, NCCL_BYTES[8]) for k in range(9)])
    return np.where(g > 1, table[np.maximum(g, 0)], 0.0)


def _stored(model: ModelSpec, precision: Precision, plans: dict[str, np.ndarray],
            moe: bool) -> tuple[np.ndarray, np.ndarray]:
    """(bytes one layer keeps per micro-batch under the plan's recomputation, bytes of its
    full working set) per plan."""
    tokens = plans["mb"] * plans["seq"] / plans["cp"]
    tp, sp, rc = plans["tp"], plans["sp"], plans["recompute"]
    rows = 0.0
    if moe:
        rows = tokens * model.moe.experts_per_token * np.where(
            plans["ep"] > 1, plans["ep_dp"] / plans["ep"], 1.0)
    parts = activation_bytes_per_layer(model, precision, tokens, tp, sp, moe, rows,
                                       plans["moe_tp"])
    working = parts["replicated"] + parts["sharded"] + parts["lse"]
    layer_input = (bytes_per_element(precision.vector_math) * model.hidden_size * tokens
                   / np.where(sp, tp, 1))
    kept = np.where(rc == 2, layer_input, np.where(rc == 1, working - parts["lse"], working))
    return kept, working


def _peak(sc: Schedule, dense: np.ndarray, moe: np.ndarray, per_dense: np.ndarray,
          per_moe: np.ndarray) -> np.ndarray:
    """[n, p] activation bytes each stage holds at its schedule's peak."""
    held_d, held_m = held(sc, dense), held(sc, moe)
    if not moe.any():
        return per_dense[:, None] * held_d.max(axis=1)[None]
    if not dense.any():
        return per_moe[:, None] * held_m.max(axis=1)[None]
    both = held_d[None] * per_dense[:, None, None] + held_m[None] * per_moe[:, None, None]
    return both.max(axis=2)


def stage_memory(sc: Schedule, dense: np.ndarray, moe: np.ndarray, first: np.ndarray,
                 last: np.ndarray, stage: dict[str, np.ndarray], plans: dict[str, np.ndarray],
                 state: dict[str, float], model: ModelSpec, precision: Precision,
                 params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per plan, the bytes of its fullest stage, by kind (module docstring)."""
    zero, tp = plans["zero"][:, None], plans["tp"]
    opt_zero = np.maximum(zero, 1) if state.get("distributed_optimizer") else zero
    shard = (plans["shard_dp"] * plans["cp"])[:, None]
    edp = (tp * plans["shard_dp"] * plans["cp"] // (plans["ep"] * plans["moe_tp"]))[:, None]
    frozen_d = stage["dense_held"] - stage["dense_train"]
    frozen_e = stage["expert_held"] - stage["expert_train"]
    mem = {"weights": (stage["dense_train"] * state["weights"]
                       + frozen_d * state["frozen_weights"]) / np.where(zero == 3, shard, 1)
           + (stage["expert_train"] * state["weights"] + frozen_e * state["frozen_weights"])
           / np.where(zero == 3, edp, 1),
           "gradients": stage["dense_train"] * state["gradients"] / np.where(zero >= 2, shard, 1)
           + stage["expert_train"] * state["gradients"] / np.where(zero >= 2, edp, 1),
           "optimizer": stage["dense_train"] * state["optimizer"]
           / np.where(opt_zero >= 1, shard, 1)
           + stage["expert_train"] * state["optimizer"] / np.where(opt_zero >= 1, edp, 1)}
    kept_d, work_d = _stored(model, precision, plans, moe=False)
    kept_m, work_m = _stored(model, precision, plans, moe=True) if moe.any() else (kept_d * 0,
                                                                                  work_d * 0)
    act = _peak(sc, dense, moe, kept_d * dense.any(), kept_m)
    recompute_work = np.where(plans["recompute"] == 2, np.maximum(work_d * dense.any(), work_m),
                              0.0)
    tokens = plans["mb"] * plans["seq"] / plans["cp"]
    # the loss's bytes per logit at its peak: fp32 logits of the fused table's loss, or what
    # eager PyTorch holds (perfcast.ops.loss_peak_bytes_per_logit), per plan
    logits = plans["logit_bytes"] * tokens * model.vocab_size / tp
    mem["activations"] = act + recompute_work[:, None] + logits[:, None] * last.sum(axis=1)[None]
    mem["comm_buffers"] = _buffers(plans, params, state, model, precision, tokens, moe.any())[
        :, None] * np.ones(sc.p)
    mem["runtime"] = np.full(mem["weights"].shape, RUNTIME_BYTES)
    # eager PyTorch (zero_grad(set_to_none=True)) allocates each gradient as backward frees
    # that layer's activations: the peak holds the larger of the two, so only the gradient
    # bytes beyond the activations count (the fused table's frameworks keep a grad buffer)
    late = plans["late_grads"][:, None]
    mem["gradients"] = np.where(late, np.maximum(mem["gradients"] - mem["activations"], 0.0),
                                mem["gradients"])
    total = sum(mem.values())
    fullest = total.argmax(axis=1)
    rows = np.arange(len(fullest))
    out = {f"memory.{k}": v[rows, fullest] for k, v in mem.items()}
    out["memory_per_gpu_bytes"] = total[rows, fullest]
    return out


def _buffers(plans, params, state, model, precision, tokens, has_moe) -> np.ndarray:
    """Communication buffers per GPU: DDP-style gradient buckets (two in flight), ZeRO-3's
    prefetched full layer and its gradient, p2p activations, MoE dispatch/combine, and NCCL's
    own per communicator."""
    tp, cp, dp, pp, ep, zero = (plans[k] for k in ("tp", "cp", "dp", "pp", "ep", "zero"))
    shard = plans["shard_dp"] * cp
    out = np.where((shard > 1) & (zero < 3), 2.0 * DDP_BUCKET_BYTES, 0.0)
    layer = np.maximum(params["layer"], params["moe_dense"] + params["moe_experts"])
    trained = np.maximum(params["train_layer"], params["train_moe"])
    out += np.where(zero == 3, 2 * layer * state["gathered"] + trained * state["gradients"],
                    0.0)
    a = bytes_per_element(precision.vector_math)
    out += np.where(pp > 1, 2 * tokens * model.hidden_size * a / np.where(plans["sp"], tp, 1),
                    0.0)
    if has_moe:
        out += np.where(ep > 1, 2 * tokens * model.moe.experts_per_token * model.hidden_size
                        * a, 0.0)
    for group in (tp, cp, shard, plans["replicas"], np.where(pp > 1, 2, 1), ep):
        out += nccl_bytes(group)
    return out


def eager_step_memory(model: ModelSpec, precision: Precision, batch: int, seq_len: int,
                      mode: str, fused_attention: bool, policy: str | None = None,
                      context: int = 0, logits_tokens: int | None = None,
                      tp: int = 1) -> dict[str, float]:
    """Bytes one GPU of a TP group holds for one eager step (`perfcast step`): weights; in
    training also gradients and optimizer state (the memory policy's bytes per parameter)
    and every layer's stored activations (`activation_bytes_per_layer`; unfused attention
    also keeps the s x s softmax output, dropout mask and dropout output, (2e + 1) bytes per
    score, Korthikanti et al. 2022 section 4.1) plus the logits and their fp32 upcast for
    the loss (HF's cross-entropy); in a forward one layer's working set and the logits; in
    decode also the KV cache of `context` + 1 tokens. `logits_tokens`: positions whose
    logits are computed (default: every token)."""
    params = model.total_params() / tp
    e = bytes_per_element(precision.activations)
    tokens = batch * (1 if mode == "decode" else seq_len)
    logits_tokens = tokens if logits_tokens is None else logits_tokens
    layer = activation_bytes_per_layer(model, precision, tokens, tp, False)
    per_layer = float(sum(float(v) for v in layer.values()))
    if not fused_attention and mode != "decode":
        per_layer += (2 * e + 1) * batch * model.num_heads / tp * float(seq_len) ** 2
    vocab = model.vocab_size / tp
    out = {"weights": bytes_per_element(precision.weights) * params, "gradients": 0.0,
           "optimizer": 0.0, "kv_cache": 0.0, "runtime": float(RUNTIME_BYTES)}
    if mode == "training":
        state = state_bytes_per_param(precision, policy)
        out.update(weights=state["weights"] * params, gradients=state["gradients"] * params,
                   optimizer=state["optimizer"] * params,
                   activations=per_layer * model.num_layers,
                   logits=logits_tokens * vocab * (e + 4.0))
        return out
    if mode == "decode":
        kv = 2 * model.num_layers * _kv_local(model, np.asarray(tp)).item()
        out["kv_cache"] = kv * (context + 1) * batch * bytes_per_element(
            precision.kv_cache)
    out.update(activations=per_layer, logits=logits_tokens * vocab * e)
    return out
