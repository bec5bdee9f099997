"""The causal-LM training loss as eager PyTorch runs it, one row per kernel.

Autocast computes cross-entropy in fp32 (PyTorch autocast op reference: log_softmax and
nll_loss autocast to float32), so 16-bit logits are cast up and log-softmaxed; in backward
the one-hot gradient is filled, pushed through log-softmax and cast back. Both op tables
that train a causal LM end with these kernels: the Megatron-style one
(`perfcast.compose.training_step_ops`) and the eager HF one (`eager_ops(mode="training")`).
"""

from __future__ import annotations

from perfcast.specs import Precision, bytes_per_element

__all__ = ["loss_peak_bytes_per_logit", "loss_rows"]


def loss_rows(tokens: float, vocab: float, precision: Precision) -> list[dict]:
    """Op rows of the loss over `tokens` positions of `vocab` logits (this GPU's shard):
    forward rows first, then backward; no fp32 casts when the math is already fp32."""
    elems = tokens * vocab
    narrow = bytes_per_element(precision.vector_math)
    # (phase, op in the eager-kernel vocabulary, family, bytes read and written per logit,
    # FLOPs per logit)
    kernels = [("forward", "cast:logits_to_fp32", "elementwise", narrow, 4.0, 1.0),
               ("forward", "softmax:log_softmax", "softmax", 4.0, 4.0, 5.0),
               ("backward", "fill:nll_loss_bwd", "elementwise", 0.0, 4.0, 1.0),
               ("backward", "softmax:log_softmax_bwd", "softmax", 8.0, 4.0, 3.0),
               ("backward", "cast:grad_to_input_dtype", "elementwise", 4.0, narrow, 1.0)]
    if narrow >= 4:  # fp32 training: no casts
        kernels = [k for k in kernels if not k[1].startswith("cast:")]
    return [{"layer": "head", "op": op, "family": family, "phase": phase, "b": 1,
             "m": tokens, "n": vocab, "k": 0.0, "flops": flops * elems,
             "bytes_read": read * elems, "bytes_written": written * elems, "dtype": "fp32",
             "count": 1} for phase, op, family, read, written, flops in kernels]


def loss_peak_bytes_per_logit(precision: Precision) -> float:
    """Bytes per logit alive at the loss's backward in eager PyTorch: log_softmax's saved
    fp32 output, nll_loss's fp32 gradient and log_softmax's fp32 input gradient. The logits
    and their fp32 upcast are gone by then: no backward needs them, and a training loop keeps
    only the loss of the model's output (HF Trainer's compute_loss). `precision` changes
    nothing today (the loss is fp32 under autocast and in fp32 runs alike)."""
    del precision
    return 3 * 4.0
