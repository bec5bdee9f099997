"""One LLM training micro-batch on one GPU, composed like every other step: its op table
priced by `step_time`. `perfcast train` builds its iterations from these steps (each layer
part's kernel seconds per phase), with the pipeline schedule, the collectives in their groups
and the memory on top.

The table is a Megatron-style training stack's (`ops.training_ops`: fused FlashAttention,
fused norms, TP/SP/CP/EP and LoRA variants) with the loss as eager PyTorch runs it under
autocast, not the eager HuggingFace graph `perfcast step --mode training` prices
(`ops.eager_ops`: s x s scores materialised, RoPE and RMSNorm as separate kernels): for
Llama-2-7B, 2048 tokens, bf16 on an H100 the eager graph's kernels take 1.66x as long, and
priced with it the MosaicML llm-foundry grid's tokens/s MAPE goes from 0.27 to 0.42.

Execution: CUDA graphs' sum of kernels (no host->GPU queue). At training shapes kernels
outlast their launches: the eager queue adds 0.01 ms to Llama-2-7B's 139 ms micro-batch.
"""

from __future__ import annotations

import pandas as pd

from perfcast.comm import CollectiveModel
from perfcast.compose._step import Execution, StepForecast, step_time
from perfcast.kernels import ExecutionTimeModel
from perfcast.ops import COLUMNS, training_ops
from perfcast.specs import Cluster, ModelSpec, ParallelPlan, Precision, bytes_per_element

__all__ = ["TRAINING_EXECUTION", "training_step", "training_step_ops"]

TRAINING_EXECUTION = Execution.CUDA_GRAPH


def training_step_ops(model: ModelSpec, micro_batch: int, seq_len: int,
                      precision: Precision | None = None, plan: ParallelPlan | None = None, *,
                      lora_rank: int | None = None) -> pd.DataFrame:
    """Forward + backward kernels and inline collectives of one micro-batch on one GPU of
    `plan` (TP/SP/CP/EP shards), the training loss included, the optimizer left out."""
    precision = precision or Precision()
    table = training_ops(model, micro_batch, seq_len, precision, plan, lora_rank=lora_rank,
                         optimizer=False)
    return _with_loss(table, precision)[COLUMNS]


def training_step(model: ModelSpec, micro_batch: int, seq_len: int, cluster: Cluster,
                  precision: Precision | None = None, plan: ParallelPlan | None = None, *,
                  lora_rank: int | None = None, time_model: ExecutionTimeModel | None = None,
                  comm_model: CollectiveModel | None = None) -> StepForecast:
    """One micro-batch's forward + backward, priced (`step_time` defaults: the plain roofline
    and ring collectives unless models are given)."""
    ops = training_step_ops(model, micro_batch, seq_len, precision, plan, lora_rank=lora_rank)
    return step_time(ops, cluster, TRAINING_EXECUTION, time_model=time_model,
                     comm_model=comm_model)


def _with_loss(table: pd.DataFrame, precision: Precision) -> pd.DataFrame:
    """Replace the head's one-pass sampling row by the training loss as eager PyTorch runs
    it: autocast computes cross-entropy in fp32 (PyTorch autocast op reference: log_softmax
    and nll_loss autocast to float32), so 16-bit logits are cast up, log-softmaxed, and in
    backward the one-hot gradient is filled, pushed through log-softmax and cast back."""
    head = table[(table["family"] == "sampling") & (table["layer"] == "head")]
    if head.empty:
        return table
    tokens, vocab = float(head["m"].iloc[0]), float(head["n"].iloc[0])
    elems = tokens * vocab
    narrow = bytes_per_element(precision.vector_math)
    rows = [("forward", "logits_to_fp32", "elementwise", narrow, 4.0, 1.0),
            ("forward", "log_softmax", "softmax", 4.0, 4.0, 5.0),
            ("backward", "nll_loss_bwd", "elementwise", 0.0, 4.0, 1.0),
            ("backward", "log_softmax_bwd", "softmax", 8.0, 4.0, 3.0),
            ("backward", "grad_to_input_dtype", "elementwise", 4.0, narrow, 1.0)]
    if narrow >= 4:  # fp32 training: no casts
        rows = [r for r in rows if r[1] not in ("logits_to_fp32", "grad_to_input_dtype")]
    loss = pd.DataFrame([{"layer": "head", "op": op, "family": fam, "phase": phase, "b": 1,
                          "m": tokens, "n": vocab, "k": 0.0, "flops": f * elems,
                          "bytes_read": r * elems, "bytes_written": w * elems, "dtype": "fp32",
                          "count": 1} for phase, op, fam, r, w, f in rows], columns=COLUMNS)
    return pd.concat([table.drop(index=head.index), loss], ignore_index=True)
