"""Bytes a deployment keeps resident per GPU: weights, KV cache, activations, runtime."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from perfcast.specs import ModelSpec, ParallelPlan, Precision, bytes_per_element

__all__ = ["MemoryFootprint", "inference_memory", "kv_bytes_per_token", "weight_bytes_per_gpu"]

# AIConfigurator systems/*.yaml `misc`: CUDA context and framework buffers (its original 551 MB
# estimate) and NCCL buffers by TP group size.
RUNTIME_BYTES = 551e6
NCCL_BYTES = {1: 0.0, 2: 358612992.0, 4: 411041792.0, 8: 411041792.0}


@dataclass(frozen=True)
class MemoryFootprint:
    weights_bytes: float
    kv_cache_bytes: float
    activation_bytes: float
    runtime_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.kv_cache_bytes + self.activation_bytes + self.runtime_bytes

    def as_dict(self) -> dict[str, float]:
        return {**asdict(self), "total_bytes": self.total_bytes}


def _expert_params(model: ModelSpec) -> float:
    if model.moe is None:
        return 0.0
    moe = model.moe
    return model.num_moe_layers * moe.num_experts * model.ffn_params(moe.expert_intermediate_size)


def weight_bytes_per_gpu(model: ModelSpec, precision: Precision, plan: ParallelPlan) -> float:
    """Weights held by one GPU. Embeddings and the LM head stay in the activation dtype (the
    AWQ/GPTQ/FP8 checkpoints quantise only the transformer layers)."""
    edge = model.embedding_params() + model.lm_head_params()
    experts = _expert_params(model)
    body = model.total_params() - edge - experts
    expert_split = plan.ep * plan.moe_tp  # each expert's slice lives on one rank
    w_b, a_b = bytes_per_element(precision.weights), bytes_per_element(precision.activations)
    per_stage = (body / plan.tp + experts / expert_split) * w_b + edge / plan.tp * a_b
    return per_stage / plan.pp


def kv_bytes_per_token(model: ModelSpec, precision: Precision, plan: ParallelPlan) -> float:
    """KV-cache bytes one token occupies on one GPU (all of its pipeline stage's attention
    layers; sparse layers add the indexer's key). Windowed layers are charged per token like
    full ones: blocks that slid out of the window are not freed (vLLM v0; v1's hybrid
    allocator frees them, so this is an upper bound for it)."""
    if model.kind == "encoder":
        return 0.0
    if model.mla:  # the latent is replicated across TP ranks
        per_layer = model.kv_cache_elements_per_token()
    else:
        per_layer = 2 * max(model.num_kv_heads // plan.tp, 1) * model.head_dim
    if model.sparse_attention:
        per_layer += model.sparse_attention.indexer_head_dim
    return (per_layer * model.num_attention_layers / plan.pp
            * bytes_per_element(precision.kv_cache))


def state_bytes_per_sequence(model: ModelSpec, precision: Precision,
                             plan: ParallelPlan) -> float:
    """Recurrent-state bytes one sequence holds on one GPU, whatever its length: fp32 SSM /
    DeltaNet states plus the short conv's last inputs, heads split over TP (engines keep one
    slot per schedulable sequence: vLLM's MambaCacheManager sizes it by max_num_seqs)."""
    lin = model.linear_mixer
    if lin is None:
        return 0.0
    conv = lin.conv_kernel * (2 * lin.key_heads * lin.key_head_dim + lin.out_width)
    per_layer = (4.0 * lin.state_elements + conv * bytes_per_element(precision.activations))
    return per_layer / plan.tp * model.num_recurrent_layers / plan.pp


def inference_memory(model: ModelSpec, precision: Precision, plan: ParallelPlan,
                     batch_size: int, max_context: int, prefill_tokens: int) -> MemoryFootprint:
    """Per-GPU footprint of serving `batch_size` sequences of up to `max_context` tokens."""
    tp = plan.tp
    inter = model.intermediate_size
    if model.moe:
        inter = max(inter, model.moe.expert_intermediate_size * model.moe.experts_per_token)
    tokens = batch_size * prefill_tokens
    # Live tensors of the widest layer: residual, normed input, QKV, gate+up and its product.
    width = 2 * model.hidden_size + (model.q_dim + 2 * model.kv_dim) / tp + 3 * inter / tp
    activations = tokens * width * bytes_per_element(precision.activations)
    activations += batch_size * model.vocab_size / tp * 4.0  # fp32 logits
    nccl = NCCL_BYTES.get(tp, NCCL_BYTES[8]) if tp > 1 else 0.0
    return MemoryFootprint(
        weights_bytes=weight_bytes_per_gpu(model, precision, plan),
        kv_cache_bytes=(kv_bytes_per_token(model, precision, plan) * max_context
                        + state_bytes_per_sequence(model, precision, plan)) * batch_size,
        activation_bytes=activations,
        runtime_bytes=RUNTIME_BYTES + nccl,
    )
