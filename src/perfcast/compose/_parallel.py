"""Multi-GPU compositions: the groups a parallel plan's collectives run in, the data-parallel
gradient reduction overlapped with backward, and pipeline parallelism with one micro-batch.

Groups (Megatron-LM's rank order: TP innermost, then CP, then DP, PP outermost): a TP group is
tp consecutive GPUs, a DP (x CP) group dp x cp GPUs tp apart, a PP neighbour tp x cp x dp GPUs
away. A group whose members sit on several nodes crosses the inter-node link: each collective
is priced by the comm layer's `CollectiveModel.collective_times` on the cluster *as that group
sees it* (`group_view`: members per node = gpus_per_node / stride, one per node once the
stride reaches a node), so the model's own choice of link and algorithm applies to strided
groups as it does to consecutive ones.

Data parallel: the one overlap rule of `perfcast step --dp`, ResNet DDP and `perfcast train`.
Gradients are reduced in equal buckets of at most 25 MiB, issued one after another on one
stream as backward fills them (PyTorch DDP, Li et al. 2020, VLDB, section 3.2.3; Megatron-LM's
overlap_grad_reduce). The reduction can end neither before backward ends plus the last bucket
(filled last) nor before the backward window opens plus all buckets (the first bucket taken
as ready at once), and ends at the later of the two bounds (`reduction_end`): exposed =
max(last bucket, all buckets - backward window).

Pipeline parallel with one micro-batch: the stages run one after another, forward then
backward, with an activation (and its gradient) sent between stages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from perfcast.comm import CollectiveModel, default_collective_model
from perfcast.compose._step import StepForecast
from perfcast.errors import InputError
from perfcast.specs import Cluster

__all__ = ["DDP_BUCKET_BYTES", "ParallelStep", "bucketed_reduction", "data_parallel_step",
           "group_collective", "group_view", "pipeline_step", "reduction_end"]

DDP_BUCKET_BYTES = 25 * 2**20  # torch DistributedDataParallel bucket_cap_mb default (25 MiB)


@dataclass(frozen=True)
class ParallelStep:
    time_s: float
    compute_s: float
    exposed_comm_s: float
    comm_s: float


def group_view(cluster: Cluster, size: int, stride: int) -> Cluster:
    """The cluster as a group of `size` GPUs spaced `stride` apart sees it: its members per
    node become the view's gpus_per_node, so `link_for(size)` picks the inter-node link
    exactly when the group spans nodes."""
    per_node = cluster.gpus_per_node
    if cluster.inter_node is None or size * stride <= per_node and stride < per_node:
        return cluster
    members = max(min(per_node // max(stride, 1), size), 1)
    if members == per_node:
        return cluster
    return cluster.model_copy(update={"gpus_per_node": members,
                                      "num_nodes": math.ceil(size / members)})


def group_collective(model: CollectiveModel, cluster: Cluster, kind: str,
                     message_bytes: ArrayLike, size: ArrayLike, stride: ArrayLike
                     ) -> np.ndarray:
    """Seconds of one `kind` collective per entry, each in its group's view of the cluster
    (0 for groups of one or empty messages)."""
    message = np.asarray(message_bytes, dtype=float)
    size = np.broadcast_to(np.asarray(size, dtype=int), message.shape)
    stride = np.broadcast_to(np.asarray(stride, dtype=int), message.shape)
    out = np.zeros(message.shape)
    live = (size > 1) & (message > 0)
    if not live.any():
        return out
    pairs = np.unique(np.column_stack([size[live], stride[live]]), axis=0)
    for g, st in pairs:
        sel = live & (size == g) & (stride == st)
        view = group_view(cluster, int(g), int(st))
        kinds = np.full(int(sel.sum()), kind, dtype=object)
        out[sel] = model.collective_times(kinds, message[sel], np.full(len(kinds), g), view)
    return out


def bucketed_reduction(model: CollectiveModel, cluster: Cluster, kind: str,
                       total_bytes: ArrayLike, size: ArrayLike, stride: ArrayLike,
                       bucket_bytes: float = DDP_BUCKET_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """(all buckets' seconds, the last bucket's seconds) of reducing `total_bytes` in equal
    buckets of at most `bucket_bytes`, per entry."""
    total = np.asarray(total_bytes, dtype=float)
    buckets = np.maximum(np.ceil(total / bucket_bytes), 1.0)
    one = group_collective(model, cluster, kind, total / buckets, size, stride)
    return one * buckets, one


def reduction_end(backward_end: ArrayLike, window_start: ArrayLike, all_s: ArrayLike,
                  last_s: ArrayLike) -> np.ndarray:
    """When a bucketed reduction overlapped with backward ends (module docstring): the later
    of backward's end plus the last bucket and the window's start plus every bucket;
    backward's end when there is nothing to reduce."""
    all_s = np.asarray(all_s, dtype=float)
    return np.where(all_s > 0, np.maximum(np.add(backward_end, last_s),
                                          np.add(window_start, all_s)), backward_end)


def _backward_s(step: StepForecast) -> float:
    ops = step.ops
    return float(ops.loc[ops["phase"] == "backward", "total_s"].sum())


def data_parallel_step(step: StepForecast, grad_bytes: float, cluster: Cluster, dp: int,
                       comm_model: CollectiveModel | None = None,
                       bucket_bytes: float = DDP_BUCKET_BYTES,
                       stride: int = 1) -> ParallelStep:
    """One DDP iteration: `step` is one GPU's forward + backward on its share of the batch;
    its backward kernels are the window the buckets hide under (`reduction_end`). `stride`:
    GPUs between DP ranks (the TP degree under Megatron's rank order)."""
    if dp < 1:
        raise InputError("dp", f"must be >= 1, got {dp}", ">= 1")
    comm_model = comm_model or default_collective_model()
    if dp == 1 or grad_bytes <= 0:
        return ParallelStep(step.time_s, step.time_s, 0.0, 0.0)
    all_s, last_s = bucketed_reduction(comm_model, cluster, "allreduce", [grad_bytes], [dp],
                                       [stride], bucket_bytes)
    # times relative to backward's end: the exposed part is the reduction's end
    exposed = float(reduction_end(0.0, -_backward_s(step), all_s, last_s)[0])
    return ParallelStep(step.time_s + exposed, step.time_s, exposed, float(all_s[0]))


def pipeline_step(step: StepForecast, activation_bytes: float, cluster: Cluster, pp: int,
                  comm_model: CollectiveModel | None = None) -> ParallelStep:
    """One micro-batch through `pp` stages and back: `step` is the whole model's forward +
    backward on one GPU (the stages' sum); each boundary sends activations forward and their
    gradients back."""
    if pp < 1:
        raise InputError("pp", f"must be >= 1, got {pp}", ">= 1")
    comm_model = comm_model or default_collective_model()
    if pp == 1:
        return ParallelStep(step.time_s, step.time_s, 0.0, 0.0)
    send = float(comm_model.collective_times(np.array(["sendrecv"], dtype=object),
                                             np.array([activation_bytes]), np.array([2]),
                                             cluster)[0])
    has_backward = bool((step.ops["phase"] == "backward").any())
    comm = (pp - 1) * send * (2 if has_backward else 1)
    return ParallelStep(step.time_s + comm, step.time_s, comm, comm)
