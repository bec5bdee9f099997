"""One schedule group's plans: task durations, the simulated pipeline, gradient reduction,
optimizer step and breakdown (see perfcast.train._engine for the composition)."""

from __future__ import annotations

import numpy as np

from perfcast.comm import CollectiveModel
from perfcast.compose import (
    DDP_BUCKET_BYTES,
    bucketed_reduction,
    group_collective,
    reduction_end,
)
from perfcast.kernels import ExecutionTimeModel
from perfcast.specs import Cluster, ModelSpec, Precision
from perfcast.train._memory import stage_memory
from perfcast.train._optimizer import adam_seconds
from perfcast.train._parts import INLINE_KINDS, Parts
from perfcast.train._schedule import Schedule, simulate

__all__ = ["KINDS", "stage_results"]

KINDS = ("compute", *INLINE_KINDS)
_PARTS_OF = ("layer", "moe_layer", "embedding", "head")


def _tasks(table: dict, weights: tuple[np.ndarray, ...]) -> dict[str, tuple]:
    """kind -> ([n, p, v] forward, [n, p, v] backward) seconds of each chunk's task."""
    out = {}
    for kind in KINDS:
        f = b = 0.0
        for part, w in zip(_PARTS_OF, weights, strict=True):
            pf, pb = table[(part, kind)]
            f = f + w[None] * pf[:, None, None]
            b = b + w[None] * pb[:, None, None]
        out[kind] = (f, b)
    return out


def _zero3_edges(parts: Parts, tasks: dict, totals: dict) -> None:
    """The first layer's gather of each pass and the last layer's reduce-scatter have no
    neighbour to hide under."""
    ag = np.maximum(parts.total[("layer", "zero_allgather")][0],
                    parts.total[("moe_layer", "zero_allgather")][0])[:, None, None]
    rs = np.maximum(parts.total[("layer", "zero_reducescatter")][1],
                    parts.total[("moe_layer", "zero_reducescatter")][1])[:, None, None]
    for table in (tasks, totals):
        f, b = table["zero_allgather"]
        table["zero_allgather"] = (f + ag, b)
        f, b = table["zero_reducescatter"]
        table["zero_reducescatter"] = (f, b + rs)


def _per_stage(table: dict, m: np.ndarray) -> dict[str, np.ndarray]:
    """kind -> [n, p] seconds a stage spends on it over all micro-batches."""
    return {k: m[:, None] * (f + b).sum(axis=2) for k, (f, b) in table.items()}


def _end_chunks(sc: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """[p, v] indicators of the chunk holding the embedding (first) and the head (last)."""
    first, last = np.zeros((sc.p, sc.v)), np.zeros((sc.p, sc.v))
    first[0, 0], last[sc.p - 1, sc.v - 1] = 1.0, 1.0
    return first, last


def stage_tasks(sc: Schedule, dense: np.ndarray, moe: np.ndarray, parts: Parts
                ) -> tuple[dict[str, tuple], dict[str, tuple]]:
    """kind -> ([n, p, v] forward, [n, p, v] backward) seconds of each chunk's task: the
    exposed part (what the simulation runs) and the total (overlapped communication too)."""
    weights = (dense, moe, *_end_chunks(sc))
    tasks, totals = _tasks(parts.exposed, weights), _tasks(parts.total, weights)
    _zero3_edges(parts, tasks, totals)
    return tasks, totals


def stage_results(sc: Schedule, dense: np.ndarray, moe: np.ndarray, parts: Parts,
                  plans: dict[str, np.ndarray], params: dict[str, np.ndarray],
                  send: np.ndarray, state: dict[str, float], model: ModelSpec,
                  cluster: Cluster, precision: Precision, comm: CollectiveModel,
                  time_model: ExecutionTimeModel) -> dict[str, np.ndarray]:
    """Result columns for plans sharing the schedule graph `sc`."""
    p = sc.p
    first, last = _end_chunks(sc)
    tasks, totals = stage_tasks(sc, dense, moe, parts)
    fwd = sum(f for f, _ in tasks.values())
    bwd = sum(b for _, b in tasks.values())
    n = len(send)
    if p > 1:  # with and without p2p sends in one pass: the second half sends for free
        start, end = simulate(sc, np.concatenate([fwd, fwd]), np.concatenate([bwd, bwd]),
                              np.concatenate([send, np.zeros(n)]))
        no_send = end[n:].max(axis=1)
        start, end = start[:n], end[:n]
        made = end.max(axis=1)
    else:
        start, end = simulate(sc, fwd, bwd, send)
        made = no_send = end.max(axis=1)
    m = plans["m"].astype(float)
    spent = _per_stage(tasks, m)
    busy = sum(spent.values())
    stage = _stage_params(dense, moe, first, last, params, plans, model)
    sync = _gradient_sync(sc, start, end, stage, plans, state, cluster, comm)
    opt = adam_seconds(time_model, cluster.device, sync["optimizer_params"], state)
    sync["allgather_exposed"] = _param_gather_wait(sync, fwd, plans)
    finish = sync["end"] + opt + sync["allgather_exposed"]
    memory = stage_memory(sc, dense, moe, first, last, stage, plans, state, model, precision,
                          params)
    out = _assemble(spent, busy, made, no_send, finish, sync, totals, send, sc, plans)
    recompute = m[:, None] * (dense.sum(axis=1)[None] * parts.recompute["layer"][:, None]
                              + moe.sum(axis=1)[None] * parts.recompute["moe_layer"][:, None])
    out["breakdown.recompute_s"] = recompute[np.arange(len(m)), busy.argmax(axis=1)]
    out.update(memory)
    return out


def _stage_params(dense, moe, first, last, params, plans, model) -> dict[str, np.ndarray]:
    """[n, p] parameters per GPU of each stage: held and trainable, dense and expert."""
    def per_stage(weight, values):
        return weight.sum(axis=1)[None] * values[:, None]

    head_held = params["head"] * ~((plans["pp"] == 1) & model.tied_embeddings)
    dense_held = (per_stage(dense, params["layer"]) + per_stage(moe, params["moe_dense"])
                  + per_stage(first, params["embedding"]) + per_stage(last, head_held))
    expert_held = per_stage(moe, params["moe_experts"])
    edges = (per_stage(first, params["embedding"]) + per_stage(last, head_held))
    dense_train = (per_stage(dense, params["train_layer"]) + per_stage(moe, params["train_moe"])
                   + edges * params["full_finetune"][:, None])
    expert_train = expert_held * params["full_finetune"][:, None]
    return {"dense_held": dense_held, "expert_held": expert_held, "dense_train": dense_train,
            "expert_train": expert_train}


def _gradient_sync(sc, start, end, stage, plans, state, cluster, comm) -> dict[str, np.ndarray]:
    """Per stage: when its gradient reduction ends, its optimizer's parameter count and its
    post-step parameter all-gather (ZeRO-1/2)."""
    zero = plans["zero"][:, None]
    shard = (plans["shard_dp"] * plans["cp"])[:, None] * np.ones(sc.p)
    edp = (plans["tp"] * plans["shard_dp"] * plans["cp"]
           // (plans["ep"] * plans["moe_tp"]))[:, None] * np.ones(sc.p)
    stride_d = plans["tp"][:, None] * np.ones(sc.p)
    stride_e = plans["ep"][:, None] * np.ones(sc.p)
    grad = state["gradients"]
    total, last_bucket = np.zeros(shard.shape), np.zeros(shard.shape)
    for kind, rows in (("allreduce", zero == 0), ("reducescatter", (zero == 1) | (zero == 2))):
        rows = rows & np.ones(sc.p, dtype=bool)
        if not rows.any():
            continue
        for held, group, stride in ((stage["dense_train"], shard, stride_d),
                                    (stage["expert_train"], edp, stride_e)):
            t, one = bucketed_reduction(comm, cluster, kind, held[rows] * grad, group[rows],
                                        stride[rows])
            total[rows] += t
            last_bucket[rows] = np.maximum(last_bucket[rows], one)
    total *= np.where(zero == 2, plans["m"][:, None], 1)
    replica_t, replica_one = _replica_sync(stage, plans, shard, edp, grad, cluster, comm)
    total += replica_t
    last_bucket = np.maximum(last_bucket, replica_one)
    stage_end = end[:, sc.order[:, -1]]
    window = np.where(zero == 2, _first_backward(sc, start),
                      start[:, sc.final_backward].min(axis=2))
    sync_end = reduction_end(stage_end, window, total, last_bucket)
    sharded = zero >= 1
    opt_params = (stage["dense_train"] / np.where(sharded, shard, 1)
                  + stage["expert_train"] / np.where(sharded, edp, 1))
    gather, buckets = np.zeros(shard.shape), np.ones(shard.shape)
    post = ((zero == 1) | (zero == 2)) & np.ones(sc.p, dtype=bool)
    if post.any():
        for held, group, stride in ((stage["dense_train"], shard, stride_d),
                                    (stage["expert_train"], edp, stride_e)):
            gather[post] += group_collective(comm, cluster, "allgather",
                                             held[post] * state["gathered"], group[post],
                                             stride[post])
        gathered = (stage["dense_train"] + stage["expert_train"]) * state["gathered"]
        buckets = np.maximum(np.ceil(gathered / DDP_BUCKET_BYTES), 1.0)
    return {"end": sync_end, "stage_end": stage_end, "reduce": total, "replica": replica_t,
            "allgather": gather, "gather_buckets": buckets,
            "optimizer_params": opt_params, "gradient_bytes": (stage["dense_train"]
                                                              + stage["expert_train"]) * grad}


def _param_gather_wait(sync: dict, fwd: np.ndarray, plans: dict[str, np.ndarray]
                       ) -> np.ndarray:
    """[n, p] seconds the ZeRO-1/2 parameter all-gather holds the iteration: all of it, or,
    overlapped with the next iteration's forward (Megatron-Core --overlap-param-gather:
    bucket by bucket as the forward reaches each bucket's layers), its first bucket or
    what outlasts the stage's first forward pass, whichever is longer."""
    gather = sync["allgather"]
    overlapped = np.maximum(gather / sync["gather_buckets"], gather - fwd.sum(axis=2))
    return np.where(plans["gather_overlap"][:, None], overlapped, gather)


def _replica_sync(stage, plans, shard, edp, grad, cluster, comm
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Hybrid sharding (HSDP, FSDP2 HYBRID_SHARD): after the reduce-scatter inside its shard
    group, each rank all-reduces its gradient shard with the rank holding the same shard in
    every other replica, once per iteration (Zhao et al. 2023, PyTorch FSDP, section 3.2.2).
    Replica groups are tp x shard_dp x cp GPUs apart. (total, last bucket) seconds [n, p]."""
    rows = (plans["replicas"] > 1)[:, None] & np.ones(shard.shape[1], dtype=bool)
    total, last = np.zeros(shard.shape), np.zeros(shard.shape)
    if not rows.any():
        return total, last
    replicas = plans["replicas"][:, None] * np.ones(shard.shape[1])
    apart = (plans["tp"] * plans["shard_dp"] * plans["cp"])[:, None] * np.ones(shard.shape[1])
    for held, group in ((stage["dense_train"], shard), (stage["expert_train"], edp)):
        t, one = bucketed_reduction(comm, cluster, "allreduce", (held / group * grad)[rows],
                                    replicas[rows], apart[rows])
        total[rows] += t
        last[rows] = np.maximum(last[rows], one)
    return total, last


def _first_backward(sc: Schedule, start: np.ndarray) -> np.ndarray:
    """[n, p] start of each stage's first backward task."""
    first = np.array([row[sc.backward[row]][0] for row in sc.order])
    return start[:, first]


def _assemble(spent, busy, made, no_send, finish, sync, totals, send, sc,
              plans) -> dict[str, np.ndarray]:
    """Iteration time and a breakdown whose parts sum to it (module docstring of _engine)."""
    n = len(made)
    rows = np.arange(n)
    iteration = finish.max(axis=1)
    crit = finish.argmax(axis=1)
    hot = busy.argmax(axis=1)
    rest = iteration - made
    dp_exposed = np.minimum(rest, np.maximum(sync["end"][rows, crit] - made, 0.0))
    gather = np.minimum(rest - dp_exposed, sync["allgather_exposed"][rows, crit])
    out = {"iteration_time_s": iteration, "breakdown.compute_s": spent["compute"][rows, hot],
           "breakdown.bubble_s": np.maximum(no_send - busy[rows, hot], 0.0),
           "breakdown.optimizer_s": rest - dp_exposed - gather}
    exposed = {k: spent[k][rows, hot] for k in INLINE_KINDS}
    zero = plans["zero"]
    reduce, replica = sync["reduce"][rows, crit], sync["replica"][rows, crit]
    # under ZeRO the tail is the in-group reduce-scatter and the replicas' all-reduce (HSDP)
    to_replicas = np.where(zero == 0, 1.0, np.divide(replica, reduce, out=np.zeros(n),
                                                     where=reduce > 0))
    exposed["dp_allreduce"] = dp_exposed * to_replicas
    exposed["zero_reducescatter"] = exposed["zero_reducescatter"] + dp_exposed * (1 - to_replicas)
    exposed["zero_allgather"] = exposed["zero_allgather"] + gather
    exposed["pp_sendrecv"] = made - no_send
    for kind, value in exposed.items():
        out[f"breakdown.exposed_comm.{kind}_s"] = value
    out["breakdown.exposed_comm_s"] = sum(exposed.values())
    full = _per_stage(totals, plans["m"].astype(float))
    comm_total = {k: full[k][rows, hot] for k in INLINE_KINDS}
    comm_total["dp_allreduce"] = np.where(zero == 0, reduce, replica)
    comm_total["zero_reducescatter"] = comm_total["zero_reducescatter"] + np.where(
        zero > 0, reduce - replica, 0.0)
    comm_total["zero_allgather"] = comm_total["zero_allgather"] + sync["allgather"][rows, crit]
    comm_total["pp_sendrecv"] = send * sc.sends[hot]
    for kind, value in comm_total.items():
        out[f"comm.{kind}_s"] = value
    out["breakdown.comm_total_s"] = sum(comm_total.values())
    out["bubble_fraction"] = np.divide(out["breakdown.bubble_s"], no_send,
                                       out=np.zeros(n), where=no_send > 0)
    out["gradient_bytes"] = sync["gradient_bytes"][rows, crit]
    _overlap_costs(out, exposed, comm_total, plans)
    return out


def _overlap_costs(out: dict[str, np.ndarray], exposed: dict[str, np.ndarray],
                   comm_total: dict[str, np.ndarray], plans: dict[str, np.ndarray]) -> None:
    """Add what hiding collectives costs (perfcast.train._overlap): SM contention and the
    stack's overlap loss, each a rate per hidden second (every kind's full time minus its
    exposed part; p2p sends, one or two channels, excepted), to the iteration."""
    hidden = sum(np.maximum(comm_total[k] - exposed[k], 0.0) for k in comm_total
                 if k != "pp_sendrecv")
    out["breakdown.hidden_comm_s"] = hidden  # not a part of the sum: what the two rates price
    out["breakdown.contention_s"] = plans["sm_share"] * hidden
    out["breakdown.overlap_loss_s"] = plans["overlap_loss"] * hidden
    out["iteration_time_s"] = (out["iteration_time_s"] + out["breakdown.contention_s"]
                               + out["breakdown.overlap_loss_s"])
