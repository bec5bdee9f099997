"""A serving-style `Batch` as the eager PyTorch graph HF `generate()` runs for it.

`infer` prices a request as a sequence of batches (one prefill, then decode steps over a
growing context). A serving engine runs them as its fused op table (`step_ops`); an eager
PyTorch stack (HF transformers, torch.compile) runs the model's own module graph: the prompt
as one forward with last-token logits, each further token as one decode step over the cache
(`eager_ops`, modes 'forward' and 'decode').
"""

from __future__ import annotations

import pandas as pd

from perfcast.errors import InputError
from perfcast.ops._batch import Batch
from perfcast.ops._eager import eager_ops
from perfcast.specs import ModelSpec, ParallelPlan, Precision

__all__ = ["eager_batch_ops"]


def eager_batch_ops(model: ModelSpec, batch: Batch, precision: Precision, plan: ParallelPlan,
                    attention: str, fused: bool) -> pd.DataFrame:
    """The eager graph of `batch`: all sequences prefilling the same prompt from an empty
    cache, or all decoding at the same context (what generate() runs for a static batch)."""
    if batch.encoder_tokens or model.kind != "decoder":
        raise InputError("model", f"{model.name} is {model.kind}: generate()'s eager graph "
                         "is modelled for decoder-only models", "a decoder-only model, or a "
                         "serving stack (--stack trtllm|vllm|sglang)")
    prefill, contexts = set(batch.prefill_tokens), set(batch.decode_context)
    if (prefill and contexts) or len(prefill) > 1 or len(contexts) > 1 \
            or any(batch.prefill_context):
        raise InputError("batch", "generate() runs one prompt length or one context per step",
                         "a static batch of equal requests")
    n = batch.num_seqs
    if prefill:
        return eager_ops(model, n, prefill.pop(), "forward", precision, plan, fused,
                         attention=attention, logits="last")
    return eager_ops(model, n, 1, "decode", precision, plan, fused, attention=attention,
                     context=contexts.pop() - 1, logits="last")
