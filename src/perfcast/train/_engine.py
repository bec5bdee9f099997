"""Training iterations of many plans of one model on one cluster, forecast together.

Per plan: each distinct micro-batch is a step composed by `perfcast.compose`
(`training_step_ops` priced by `step_times`, perfcast.train._layer); its layer parts' kernels
and the inline collectives priced in their groups (perfcast.train._parts) become each
pipeline task's duration; the schedule is simulated (perfcast.train._schedule) with and
without p2p sends; each stage then reduces its gradients in buckets overlapped with its last
backward (every micro-batch's under ZeRO-2; `compose.reduction_end`, the rule `perfcast step
--dp` uses too), steps the optimizer on its shard and, under ZeRO-1/2, all-gathers the
updated parameters. The iteration ends when the last stage does. Plans sharing a schedule
graph (kind, p, m, v) are simulated in one vectorised pass.

The breakdown attributes time so that its parts sum to the iteration: compute and inline
communication of the busiest stage, the bubble (the pipeline's makespan without sends
minus that stage's busy time), the sends' extension of the makespan, then the gradient
reduction, the optimizer and the parameter all-gather after the last stage finishes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from perfcast.comm import CollectiveModel
from perfcast.compose import EagerGraph, group_collective
from perfcast.kernels import ExecutionTimeModel
from perfcast.ops import loss_peak_bytes_per_logit
from perfcast.progress import ProgressFn
from perfcast.specs import ModelSpec, bytes_per_element
from perfcast.train._job import RECOMPUTE, TrainJob
from perfcast.train._layer import LayerKey, price_layers
from perfcast.train._memory import state_bytes_per_param
from perfcast.train._parts import Parts, layer_parts, params_per_gpu
from perfcast.train._pipeline import stage_results, stage_tasks
from perfcast.train._scale import scale_columns
from perfcast.train._schedule import Schedule, build_schedule

__all__ = ["EXPOSED_KINDS", "PipelineTasks", "evaluate", "pipeline_tasks", "plan_arrays"]

EXPOSED_KINDS = ("tp", "sp", "cp", "ep_alltoall", "dp_allreduce", "zero_allgather",
                 "zero_reducescatter", "pp_sendrecv")


def plan_arrays(jobs: list[TrainJob]) -> dict[str, np.ndarray]:
    """One array per plan dimension, one entry per job."""
    def col(fn, dtype=int):
        return np.array([fn(j) for j in jobs], dtype=dtype)

    return {
        "tp": col(lambda j: j.plan.tp), "pp": col(lambda j: j.plan.pp),
        "dp": col(lambda j: j.plan.dp), "cp": col(lambda j: j.plan.cp),
        "ep": col(lambda j: j.plan.ep), "sp": col(lambda j: j.plan.sp, bool),
        "zero": col(lambda j: j.plan.zero_stage), "mb": col(lambda j: j.micro_batch),
        "shard_dp": col(lambda j: j.plan.shard_ranks),
        "sm_share": col(lambda j: j.overlap.sm_share(j.cluster.device.sm_count), float),
        "overlap_loss": col(lambda j: j.overlap.overlap_loss, float),
        "tp_overlap": col(lambda j: j.overlap.tp_comm_overlap, bool),
        "gather_overlap": col(lambda j: j.overlap.param_gather_overlap, bool),
        "cp_a2a": col(lambda j: j.plan.cp_algorithm == "all-to-all", bool),
        "replicas": col(lambda j: j.plan.replicas),
        "m": col(lambda j: j.micro_batches), "v": col(lambda j: j.virtual_stages),
        "recompute": col(lambda j: RECOMPUTE.index(j.recompute)),
        "global_batch": col(lambda j: j.global_batch), "seq": col(lambda j: j.seq_len),
    }


@cache
def chunk_layers(model: ModelSpec, p: int, v: int) -> tuple[np.ndarray, np.ndarray]:
    """Dense and MoE layer counts [p, v] of each stage's chunks: model chunk c x p + s holds
    a contiguous run of layers, the first L mod (p v) chunks one more."""
    chunks = p * v
    sizes = np.full(chunks, model.num_layers // chunks)
    sizes[: model.num_layers % chunks] += 1
    starts = np.concatenate([[0], np.cumsum(sizes)])
    moe = np.array([model.is_moe_layer(i) for i in range(model.num_layers)], dtype=int)
    moe_count = np.array([moe[starts[k]:starts[k + 1]].sum() for k in range(chunks)])
    dense, moe_layers = np.zeros((p, v)), np.zeros((p, v))
    for k in range(chunks):
        c, s = divmod(k, p)
        dense[s, c], moe_layers[s, c] = sizes[k] - moe_count[k], moe_count[k]
    return dense, moe_layers


def _group_key(job: TrainJob) -> tuple[str, int, int, int]:
    p = job.plan.pp
    kind = job.plan.schedule.value if p > 1 else "1f1b"
    if kind == "interleaved-1f1b" and job.virtual_stages == 1:
        kind = "1f1b"
    return kind, p, job.micro_batches, job.virtual_stages if kind == "interleaved-1f1b" else 1


def _price(jobs: list[TrainJob], time_model: ExecutionTimeModel, comm: CollectiveModel):
    """(plan arrays, per-layer parts, parameters per GPU, state bytes per parameter, p2p send
    seconds) of jobs sharing model, cluster, precision, LoRA rank, memory policy and op graph."""
    first = jobs[0]
    model, cluster = first.model, first.cluster
    precision, lora = first.precision_or_default, first.lora_rank
    plans = plan_arrays(jobs)
    keys = [LayerKey.of(j.plan, j.micro_batch, j.seq_len) for j in jobs]
    costs = price_layers(keys, model, cluster, precision, lora, time_model, comm, first.graph)
    plans["host_wait"] = np.array([c.host_wait_s for c in costs])
    eager = np.array([first.graph is not None and EagerGraph.expresses(k.plan(), lora)
                      for k in keys], dtype=bool)
    plans["logit_bytes"] = np.where(eager, loss_peak_bytes_per_logit(precision), 4.0)
    plans["late_grads"] = eager
    moe_tp = np.array([max(k.tp * k.ep_dp // k.ep, 1) if k.ep > 1 else k.tp for k in keys])
    plans["moe_tp"], plans["ep_dp"] = moe_tp, np.array([k.ep_dp for k in keys])
    state = state_bytes_per_param(precision, first.memory_policy)
    params = params_per_gpu(model, plans["tp"], plans["ep"], moe_tp, lora)
    parts = layer_parts(keys, costs, plans, model, cluster, comm, precision, state, params)
    return plans, parts, params, state, _pp_send(plans, model, cluster, comm, precision)


@dataclass(frozen=True)
class PipelineTasks:
    """What the engine simulates for one job: the schedule graph (`schedule_kind` names
    it), each task kind's ([1, p, v] forward, [1, p, v] backward) exposed seconds per stage
    and chunk, and one stage-to-stage send's seconds."""

    schedule_kind: str
    schedule: Schedule
    seconds: dict[str, tuple[np.ndarray, np.ndarray]]
    send_s: float


def pipeline_tasks(job: TrainJob, time_model: ExecutionTimeModel, comm: CollectiveModel
                   ) -> PipelineTasks:
    """The task durations `evaluate` simulates for `job`, for drawing or exporting its
    schedule task by task."""
    _, parts, _, _, send = _price([job], time_model, comm)
    kind, p, m, v = _group_key(job)
    sc = build_schedule(kind, p, m, v)
    dense, moe = chunk_layers(job.model, sc.p, sc.v)
    tasks, _ = stage_tasks(sc, dense, moe, parts)
    return PipelineTasks(kind if p > 1 else "gradient accumulation", sc, tasks, float(send[0]))


def evaluate(jobs: list[TrainJob], time_model: ExecutionTimeModel,
             comm: CollectiveModel, progress: ProgressFn | None = None
             ) -> dict[str, np.ndarray]:
    """Result columns (one entry per job) for jobs sharing model, cluster, precision, LoRA
    rank and op graph. `progress(done, total)` is called as each schedule group is simulated (jobs
    done, of all; the layer pricing before the first report is the shorter part)."""
    model, cluster = jobs[0].model, jobs[0].cluster
    precision = jobs[0].precision_or_default
    plans, parts, params, state, send = _price(jobs, time_model, comm)
    groups: dict[tuple, list[int]] = {}
    for i, job in enumerate(jobs):
        groups.setdefault(_group_key(job), []).append(i)
    out: dict[str, np.ndarray] = {}
    done = 0
    for (kind, p, m, v), members in sorted(groups.items()):
        idx = np.array(members)
        sc = build_schedule(kind, p, m, v)
        dense, moe = chunk_layers(model, p, sc.v)
        res = stage_results(sc, dense, moe, _slice(parts, idx),
                            {k: a[idx] for k, a in plans.items()},
                            {k: a[idx] for k, a in params.items()}, send[idx], state, model,
                            cluster, precision, comm, time_model)
        for name, values in res.items():
            out.setdefault(name, np.zeros(len(jobs)))[idx] = values
        done += len(members)
        if progress is not None:
            progress(done, len(jobs))
    return scale_columns(jobs, out, _host_s(jobs[0].graph, plans))


def _host_s(graph, plans: dict[str, np.ndarray]) -> np.ndarray:
    """Seconds per iteration the GPUs wait on an eager stack's host: each micro-batch's wait
    (its whole model's kernels queued behind the host's dispatch, a stage's share of it under
    pipeline parallelism) and the host's fixed work per iteration (graph.host_step_s)."""
    if graph is None or not graph.host_dispatch_s:
        return np.zeros(len(plans["m"]))
    return plans["m"] * plans["host_wait"] / plans["pp"] + graph.host_step_s


def _slice(parts: Parts, idx: np.ndarray) -> Parts:
    return Parts(exposed={k: (f[idx], b[idx]) for k, (f, b) in parts.exposed.items()},
                 total={k: (f[idx], b[idx]) for k, (f, b) in parts.total.items()},
                 recompute={k: r[idx] for k, r in parts.recompute.items()})


def _pp_send(plans: dict[str, np.ndarray], model: ModelSpec, cluster, comm: CollectiveModel,
             precision) -> np.ndarray:
    """One stage-to-stage send of a micro-batch's activations (Megatron's scatter-gather
    sends 1/tp of it under SP); stages tp x cp x dp GPUs apart cross nodes once that
    reaches a node."""
    tokens = plans["mb"] * plans["seq"] / plans["cp"]
    message = tokens * model.hidden_size * bytes_per_element(precision.vector_math)
    message = message / np.where(plans["sp"], plans["tp"], 1)
    apart = plans["tp"] * plans["cp"] * plans["dp"]
    stride = np.where(apart >= cluster.gpus_per_node, cluster.gpus_per_node, 1)
    return group_collective(comm, cluster, "sendrecv", message,
                            np.where(plans["pp"] > 1, 2, 1), stride)

