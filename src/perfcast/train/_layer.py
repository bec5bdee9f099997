"""One transformer layer's kernels per micro-batch, priced once per layer shape.

A plan's compute is (layers on a stage) x (one layer's forward and backward) plus the
embedding on the first stage and the LM head on the last, so the kernel model runs once per
distinct (tp, sp, cp, ep, micro-batch, seq_len) — not once per plan. Layer shapes missing
from the memo are priced together in one vectorised kernel-model call; results are kept per
time model (weakly: a discarded model takes its memo with it) and per model/device/precision.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import pandas as pd

from perfcast.kernels import ExecutionTimeModel
from perfcast.ops import COLUMNS, COMM_FAMILIES, training_ops
from perfcast.specs import Device, ModelSpec, ParallelPlan, Precision, bytes_per_element

__all__ = ["LayerCost", "LayerKey", "price_layers"]

_PARTS = ("layer", "moe_layer", "embedding", "head")
_PHASES = ("forward", "backward")
_MEMO_LIMIT = 4096  # layer shapes kept per (time model, model, device, precision, LoRA)
_MEMO: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class LayerKey:
    """The plan dimensions a layer's kernels depend on (per GPU)."""

    tp: int
    sp: bool
    cp: int
    ep: int
    ep_dp: int  # DP ranks whose tokens meet in one EP group's experts (ep / tp, >= 1)
    expert_skew: float
    micro_batch: int
    seq_len: int

    def plan(self) -> ParallelPlan:
        return ParallelPlan(tp=self.tp, sp=self.sp, cp=self.cp, ep=self.ep, dp=self.ep_dp,
                            expert_skew=self.expert_skew)

    @classmethod
    def of(cls, plan: ParallelPlan, micro_batch: int, seq_len: int) -> LayerKey:
        ep_dp = max(plan.ep // plan.tp, 1) if plan.ep > 1 else 1
        skew = plan.expert_skew if plan.ep > 1 else 1.0
        return cls(plan.tp, plan.sp, plan.cp, plan.ep, ep_dp, skew, micro_batch, seq_len)


@dataclass(frozen=True)
class LayerCost:
    """Kernel seconds of one micro-batch on one GPU: `compute[part][phase]` for one dense
    layer ('layer'), one MoE layer ('moe_layer'), the embedding and the head; `attention`
    the attention kernels' share of a layer's (for CP overlap and selective recompute);
    `collectives` one row per collective of one instance of each part: (part, phase,
    family, message bytes, group size), the intra-layer TP/SP and EP traffic."""

    compute: dict[str, dict[str, float]]
    attention: dict[str, dict[str, float]]
    collectives: tuple[tuple[str, str, str, float, int], ...]

    def seconds(self, part: str, phase: str) -> float:
        return self.compute[part][phase]


def _memo_for(time_model: ExecutionTimeModel, context: tuple) -> dict:
    try:
        per_model = _MEMO.setdefault(time_model, {})
    except TypeError:  # not weak-referenceable: no memo across calls
        per_model = {}
    memo = per_model.setdefault(context, {})
    if len(memo) > _MEMO_LIMIT:
        memo.clear()
    return memo


def price_layers(keys: list[LayerKey], model: ModelSpec, device: Device, precision: Precision,
                 lora_rank: int | None, time_model: ExecutionTimeModel) -> list[LayerCost]:
    """LayerCost of each key (memoised; missing keys priced in one kernel-model call)."""
    context = (model.model_dump_json(), device.model_dump_json(),
               precision.model_dump_json(), lora_rank)
    memo = _memo_for(time_model, context)
    missing = list(dict.fromkeys(k for k in keys if k not in memo))
    if missing:
        tables = [_with_loss(training_ops(model, k.micro_batch, k.seq_len, precision, k.plan(),
                                          lora_rank=lora_rank, optimizer=False), precision)
                  for k in missing]
        sizes = [len(t) for t in tables]
        ops = pd.concat(tables, ignore_index=True)[COLUMNS]
        times = np.asarray(time_model.kernel_times(ops, device), dtype=float)
        start = 0
        for key, table, n in zip(missing, tables, sizes, strict=True):
            memo[key] = _cost(table, times[start:start + n])
            start += n
    return [memo[k] for k in keys]


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


def _cost(table: pd.DataFrame, times: np.ndarray) -> LayerCost:
    """Sum one instance of each part's kernels per phase (row counts are layer counts)."""
    part = table["layer"].to_numpy(dtype=object)
    phase = table["phase"].to_numpy(dtype=object)
    family = table["family"].to_numpy(dtype=object)
    comm = np.isin(family, list(COMM_FAMILIES))
    attn = np.isin(family, ["attn_prefill", "attn_decode"])
    compute, attention = {}, {}
    for p in _PARTS:
        compute[p], attention[p] = {}, {}
        for ph in _PHASES:
            sel = (part == p) & (phase == ph)
            compute[p][ph] = float(times[sel & ~comm].sum())
            attention[p][ph] = float(times[sel & attn].sum())
    rows = table[comm]
    collectives = tuple(
        (str(r.layer), str(r.phase), str(r.family), float(r.m), int(r.n))
        for r in rows.itertuples(index=False))
    return LayerCost(compute=compute, attention=attention, collectives=collectives)
