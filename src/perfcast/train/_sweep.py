"""The plan search: every valid way to train one model on N GPUs, forecast and ranked.

Enumeration order (deterministic): tp, cp, pp, ep, sp, micro-batch, schedule, ZeRO stage,
recomputation. All plans are forecast in one batch (perfcast.train._engine): each distinct
layer shape is priced by the kernel model once and each distinct schedule graph simulated
once for all plans that share it, so 10^4 plans take seconds, not hours.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfcast.comm import CollectiveModel, default_collective_model
from perfcast.compose import EagerGraph
from perfcast.errors import InputError
from perfcast.kernels import ExecutionTimeModel
from perfcast.progress import ProgressFn, current
from perfcast.specs import Cluster, ModelSpec, ParallelPlan, Precision
from perfcast.train._engine import evaluate
from perfcast.train._flops import model_flops
from perfcast.train._forecast import default_time_model
from perfcast.train._job import RECOMPUTE, TrainJob
from perfcast.train._memory import MemoryBudget
from perfcast.train._memory_policy import DEFAULT_MEMORY_POLICY
from perfcast.train._overlap import CommOverlap

__all__ = ["SWEEP_COLUMNS", "sweep_plans"]

SWEEP_COLUMNS = ["tp", "pp", "dp", "cp", "ep", "sp", "zero_stage", "micro_batch",
                 "micro_batches", "schedule", "virtual_stages", "recompute",
                 "iteration_time_s", "tokens_per_s", "tflops_per_gpu", "mfu",
                 "memory_per_gpu_bytes", "fits", "bubble_fraction", "exposed_comm_s"]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _layouts(model: ModelSpec, cluster: Cluster, gpus: int, seq_len: int, max_cp: int):
    """(tp, cp, pp, dp, ep) that split the model over exactly `gpus` GPUs."""
    for tp in _divisors(gpus):
        if tp > cluster.gpus_per_node:
            break
        try:
            ParallelPlan(tp=tp).check(model)
        except InputError:
            continue
        for cp in (c for c in _divisors(gpus // tp) if c <= max_cp and c & (c - 1) == 0):
            if cp > 1 and seq_len % (2 * cp):
                continue
            for pp in _divisors(gpus // (tp * cp)):
                if pp > model.num_layers:
                    break
                dp = gpus // (tp * cp * pp)
                eps = [1] if model.moe is None else [
                    e for e in _divisors(model.moe.num_experts)
                    if (tp * dp) % e == 0 and (e <= tp or e % tp == 0)]
                for ep in eps:
                    yield tp, cp, pp, dp, ep


def _schedules(pp: int, m: int, layers: int, virtual: tuple[int, ...]):
    if pp == 1:
        yield "1f1b", 1
        return
    yield "1f1b", 1
    yield "gpipe", 1
    for v in virtual:
        if m % pp == 0 and pp * v <= layers:
            yield "interleaved-1f1b", v


def _jobs(model: ModelSpec, cluster: Cluster, gpus: int, seq_len: int, global_batch: int,
          precision: Precision | None, lora_rank: int | None, micro_batch_sizes, zero_stages,
          recompute, virtual, max_cp: int, expert_skew: float,
          memory_policy: str = DEFAULT_MEMORY_POLICY,
          overlap: CommOverlap | None = None,
          memory_budget: MemoryBudget | None = None,
          pipeline_sharding: bool = False,
          graph: EagerGraph | None = None) -> list[TrainJob]:
    overlap = overlap or CommOverlap()
    memory_budget = memory_budget or MemoryBudget()
    jobs = []
    for tp, cp, pp, dp, ep in _layouts(model, cluster, gpus, seq_len, max_cp):
        for sp in (False, True) if tp > 1 else (False,):
            for mb in micro_batch_sizes:
                if global_batch % (mb * dp):
                    continue
                m = global_batch // (mb * dp)
                for schedule, v in _schedules(pp, m, model.num_layers, virtual):
                    for zero in (z for z in zero_stages
                                 if pp == 1 or z <= 1 or pipeline_sharding):
                        plan = ParallelPlan(tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, sp=sp,
                                            zero_stage=zero, schedule=schedule,
                                            virtual_stages=v,
                                            expert_skew=expert_skew if ep > 1 else 1.0)
                        for rc in recompute:
                            jobs.append(TrainJob.model_construct(
                                model=model, cluster=cluster, plan=plan, seq_len=seq_len,
                                micro_batch=mb, global_batch=global_batch,
                                precision=precision, recompute=rc, lora_rank=lora_rank,
                                memory_policy=memory_policy, overlap=overlap,
                                memory_budget=memory_budget, graph=graph))
    return jobs


def sweep_plans(model: ModelSpec, cluster: Cluster, *, seq_len: int, global_batch: int,
                num_gpus: int | None = None, precision: Precision | None = None,
                lora_rank: int | None = None, micro_batch_sizes: tuple[int, ...] = (1, 2, 4, 8),
                zero_stages: tuple[int, ...] = (0, 1, 2, 3),
                recompute: tuple[str, ...] = RECOMPUTE, virtual_stages: tuple[int, ...] = (2, 4),
                max_cp: int = 8, expert_skew: float = 1.0, max_plans: int | None = None,
                time_model: ExecutionTimeModel | None = None,
                comm_model: CollectiveModel | None = None,
                progress: ProgressFn | None = None,
                memory_policy: str = DEFAULT_MEMORY_POLICY,
                overlap: CommOverlap | None = None,
                memory_budget: MemoryBudget | None = None,
                pipeline_sharding: bool = False,
                graph: EagerGraph | None = None) -> pd.DataFrame:
    """Forecast every valid plan (tp within a node; cp a power of two; ZeRO-2/3 only
    without PP unless `pipeline_sharding`: a stack that shards inside pipeline stages,
    perfcast.specs.Stack) and return one row per plan (SWEEP_COLUMNS), plans that fit
    first, then by tokens/s. `max_plans` keeps that many, evenly spaced over the enumeration order.
    `progress(done, total)`: plans forecast, of all (see `evaluate`); by default the one
    `perfcast.progress.reporting` set, if any. `memory_policy`: the model-state dtypes
    (perfcast.train.MEMORY_POLICIES); `overlap`: what hiding collectives costs (default:
    SM contention alone); `memory_budget`: what part of each GPU a plan may fill (`fits`;
    default: the device's CUDA-visible bytes); `graph`: the stack's eager op table
    (compose.EagerGraph), for the plans it expresses."""
    gpus = num_gpus or cluster.num_gpus
    if gpus > cluster.num_gpus or gpus < 1:
        raise InputError("num_gpus", f"{gpus} GPUs on a {cluster.num_gpus}-GPU cluster",
                         f"1..{cluster.num_gpus}")
    bad = sorted(set(recompute) - set(RECOMPUTE))
    if bad:
        raise InputError("recompute", f"unknown {bad}", RECOMPUTE)
    # a representative job validates the shared fields (model, batch, precision, LoRA)
    TrainJob(model=model, cluster=cluster, plan=ParallelPlan(dp=1), seq_len=seq_len,
             micro_batch=1, global_batch=global_batch, precision=precision, lora_rank=lora_rank,
             memory_policy=memory_policy, memory_budget=memory_budget or MemoryBudget())
    jobs = _jobs(model, cluster, gpus, seq_len, global_batch, precision, lora_rank,
                 micro_batch_sizes, zero_stages, recompute, virtual_stages, max_cp, expert_skew,
                 memory_policy, overlap, memory_budget, pipeline_sharding, graph)
    if not jobs:
        raise InputError("global_batch", f"no plan splits {global_batch} sequences over "
                         f"{gpus} GPUs with micro-batches {list(micro_batch_sizes)}",
                         "a global batch divisible by micro_batch x dp")
    if max_plans is not None and len(jobs) > max_plans:
        keep = np.unique(np.linspace(0, len(jobs) - 1, max(max_plans, 1)).round().astype(int))
        jobs = [jobs[i] for i in keep]
    cols = evaluate(jobs, time_model or default_time_model(),
                    comm_model or default_collective_model(), progress or current())
    return _table(jobs, cols, model, cluster, seq_len, global_batch, precision, lora_rank)


def _table(jobs, cols, model, cluster, seq_len, global_batch, precision, lora_rank):
    tokens = global_batch * seq_len
    flops = model_flops(model, tokens, seq_len, lora_rank)
    peak = cluster.device.peak_flops((precision or Precision()).gemm_math, "precision")
    gpus = np.array([j.plan.num_gpus for j in jobs])
    time_s = cols["iteration_time_s"]
    df = pd.DataFrame({
        "tp": [j.plan.tp for j in jobs], "pp": [j.plan.pp for j in jobs],
        "dp": [j.plan.dp for j in jobs], "cp": [j.plan.cp for j in jobs],
        "ep": [j.plan.ep for j in jobs], "sp": [j.plan.sp for j in jobs],
        "zero_stage": [j.plan.zero_stage for j in jobs],
        "micro_batch": [j.micro_batch for j in jobs],
        "micro_batches": [j.micro_batches for j in jobs],
        "schedule": [j.plan.schedule.value for j in jobs],
        "virtual_stages": [j.plan.virtual_stages for j in jobs],
        "recompute": [j.recompute for j in jobs],
        "iteration_time_s": time_s, "tokens_per_s": tokens / time_s,
        "tflops_per_gpu": flops / time_s / gpus / 1e12, "mfu": flops / (time_s * gpus * peak),
        "memory_per_gpu_bytes": cols["memory_per_gpu_bytes"],
        "fits": cols["memory_per_gpu_bytes"] <= jobs[0].memory_budget.budget_bytes(
            cluster.device),
        "bubble_fraction": cols["bubble_fraction"],
        "exposed_comm_s": cols["breakdown.exposed_comm_s"]}, columns=SWEEP_COLUMNS)
    order = np.lexsort((np.arange(len(df)), -df["tokens_per_s"].to_numpy(),
                        ~df["fits"].to_numpy()))
    return df.iloc[order].reset_index(drop=True)
