"""Model FLOPs of one training iteration: the convention MFU is quoted in.

Convention (PaLM, Chowdhery et al. 2022, appendix B; Megatron-LM, Narayanan et al. 2021,
section 5.1): per token, 6 x N for the weight matmuls (2 forward, 4 backward) plus
3 x 2 x s x heads x (d_qk + d_v) per layer for attention, where attention counts the full
s x s score matrix (non-causal: causal masking's halving is *not* taken off, as in both
papers and in MosaicML's llm-foundry MFU) and s is min(seq_len, sliding window).
N = the matmul parameters a token passes through: every layer's attention and FFN weights
(MoE: the top-k routed experts, the shared experts and the router) plus the LM head
(V x h, also when tied); embedding lookups and norm weights are not matmuls and not counted.
Model FLOPs do not depend on the parallel plan or on recomputation.

LoRA on a frozen base: the base's weight gradients are never computed, so its matmuls count
4 x N_base (forward + input gradients), the adapters 6 x N_adapter; attention stays 3x.

Hardware FLOPs (HFU) add what recomputation re-runs: full recompute one more forward of
every layer (2 x N_layers + the attention forward), selective recompute the attention
forward (Korthikanti et al. 2022 call recomputing core attention "selective").
"""

from __future__ import annotations

from perfcast.ops._training import lora_params
from perfcast.specs import ModelSpec

__all__ = ["attention_flops_per_token", "hardware_flops", "matmul_params", "model_flops"]


def _layer_matmul_params(model: ModelSpec, layer: int) -> int:
    if model.is_moe_layer(layer):
        moe = model.moe
        experts = moe.experts_per_token + moe.num_shared_experts
        return (model.attention_params() + experts * model.ffn_params(moe.expert_intermediate_size)
                + model.hidden_size * moe.num_experts)
    return model.attention_params() + model.ffn_params()


def matmul_params(model: ModelSpec, layers_only: bool = False) -> int:
    """Weights one token's matmuls use (the N of 6N): active layer weights plus the LM head."""
    layers = sum(_layer_matmul_params(model, i) for i in range(model.num_layers))
    return layers if layers_only else layers + model.vocab_size * model.hidden_size


def attention_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """Forward attention FLOPs of one token over all layers: QK^T and AV against every key of
    the window (2 x keys x heads x (d_qk + d_v) per layer), no causal halving."""
    keys = min(seq_len, model.sliding_window or seq_len)
    d_qk = model.q_dim / model.num_heads
    d_v = model.attn_out_dim / model.num_heads
    return 2.0 * keys * model.num_heads * (d_qk + d_v) * model.num_layers


def model_flops(model: ModelSpec, tokens: float, seq_len: int,
                lora_rank: int | None = None) -> float:
    """Model FLOPs of one iteration over `tokens` tokens (module docstring)."""
    attention = 3.0 * attention_flops_per_token(model, seq_len)
    if lora_rank:
        base = 4.0 * matmul_params(model) + 6.0 * lora_params(model, lora_rank)
        return (base + attention) * tokens
    return (6.0 * matmul_params(model) + attention) * tokens


def hardware_flops(model: ModelSpec, tokens: float, seq_len: int, recompute: str,
                   lora_rank: int | None = None) -> float:
    """Model FLOPs plus the forward work that recomputation repeats."""
    flops = model_flops(model, tokens, seq_len, lora_rank)
    attention_fwd = attention_flops_per_token(model, seq_len) * tokens
    if recompute == "full":
        adapters = 2.0 * lora_params(model, lora_rank) if lora_rank else 0.0
        flops += 2.0 * matmul_params(model, layers_only=True) * tokens + attention_fwd
        flops += adapters * tokens
    elif recompute == "selective":
        flops += attention_fwd
    return flops
