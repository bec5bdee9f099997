"""One transformer layer's kernels per micro-batch, priced once per layer shape.

Each shape's micro-batch is a step composed by `perfcast.compose` (`training_step_ops`
priced by `step_times`); this module splits its priced rows by layer part and phase. A
plan's compute is (layers on a stage) x (one layer's forward and backward) plus the
embedding on the first stage and the LM head on the last, so the kernel model runs once per
distinct (tp, sp, cp, ep, micro-batch, seq_len) — not once per plan. Layer shapes missing
from the memo are priced together in one vectorised kernel-model call; results are kept per
time model (weakly: a discarded model takes its memo with it) and per model/device/precision.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from perfcast.comm import CollectiveModel
from perfcast.compose import (
    EagerGraph,
    StepForecast,
    step_times,
    training_execution,
    training_step_ops,
)
from perfcast.kernels import ExecutionTimeModel
from perfcast.ops import COMM_FAMILIES
from perfcast.specs import Cluster, ModelSpec, ParallelPlan, Precision

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
    family, message bytes, group size), the intra-layer TP/SP and EP traffic; `host_wait_s`
    the seconds the GPU waits on an eager stack's host over the whole micro-batch (0 where
    nothing is dispatched from Python: the fused table, CUDA graphs)."""

    compute: dict[str, dict[str, float]]
    attention: dict[str, dict[str, float]]
    collectives: tuple[tuple[str, str, str, float, int], ...]
    host_wait_s: float = 0.0

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


def price_layers(keys: list[LayerKey], model: ModelSpec, cluster: Cluster,
                 precision: Precision, lora_rank: int | None, time_model: ExecutionTimeModel,
                 comm_model: CollectiveModel,
                 graph: EagerGraph | None = None) -> list[LayerCost]:
    """LayerCost of each key (memoised): the missing keys' micro-batches composed by
    `compose.step_times` (their kernels in one kernel-model call per launch mode); `graph`:
    the eager table where it expresses the key's plan (`compose.training_step_ops`), its
    kernels issued by the stack's host (`graph.host_dispatch_s`, the eager queue of
    `compose.step_time`)."""
    device = cluster.device
    context = (model.model_dump_json(), device.model_dump_json(),
               precision.model_dump_json(), lora_rank,
               None if graph is None else graph.model_dump_json())
    memo = _memo_for(time_model, context)
    missing = list(dict.fromkeys(k for k in keys if k not in memo))
    if missing:
        tables = [training_step_ops(model, k.micro_batch, k.seq_len, precision, k.plan(),
                                    lora_rank=lora_rank, graph=graph) for k in missing]
        launches = [training_execution(graph, k.plan(), lora_rank) for k in missing]
        for launch in dict.fromkeys(launches):  # one kernel-model call per launch mode
            idx = [i for i, x in enumerate(launches) if x == launch]
            steps = step_times([tables[i] for i in idx], cluster, launch[0],
                               time_model=time_model, comm_model=comm_model,
                               dispatch_s=launch[1], intervals=False)
            for i, step in zip(idx, steps, strict=True):
                memo[missing[i]] = _cost(step)
    return [memo[k] for k in keys]


def _cost(step: StepForecast) -> LayerCost:
    """Sum one instance of each part's kernels per phase (row counts are layer counts). The
    collectives are kept as (message, group) rows, not at the step's flat price: train
    prices them in their groups (strided views, expert skew, perfcast.train._parts)."""
    table = step.ops
    times = table["time_s"].to_numpy(dtype=float)
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
    return LayerCost(compute=compute, attention=attention, collectives=collectives,
                     host_wait_s=step.launch_s)
