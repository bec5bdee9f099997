"""Collectives of a training plan: which GPUs form each group, and what they cost.

Rank order (Megatron-LM's default): TP innermost, then CP, then DP, PP outermost. A TP
group is tp consecutive GPUs; a CP group cp GPUs tp apart; a DP (x CP) group dp x cp GPUs
tp apart; a PP neighbour tp x cp x dp GPUs away. A group whose members sit on several
nodes crosses the inter-node link: each collective is priced by the comm layer's
`CollectiveModel.collective_times` on the cluster *as that group sees it* — members per node
= gpus_per_node / stride (one per node once the stride reaches a node) — so the model's own
choice of link and algorithm applies to strided groups as it does to consecutive ones.

Bucketed gradient reduction overlapped with backward (PyTorch DDP, Li et al. 2020, VLDB;
Megatron-LM's overlap_grad_reduce): buckets go out as backward produces them, so only what
outlasts the backward window, and at least the last bucket, is exposed.
"""

from __future__ import annotations

import math

import numpy as np

from perfcast.comm import CollectiveModel
from perfcast.specs import Cluster

__all__ = ["BUCKET_BYTES", "bucketed", "collective", "group_view"]

BUCKET_BYTES = 25 * 2**20  # torch DistributedDataParallel bucket_cap_mb default (25 MiB)


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


def collective(model: CollectiveModel, cluster: Cluster, kind: str, message_bytes: np.ndarray,
               size: np.ndarray, stride: np.ndarray) -> np.ndarray:
    """Seconds of one `kind` collective per entry (0 for groups of one or empty messages)."""
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


def bucketed(model: CollectiveModel, cluster: Cluster, kind: str, total_bytes: np.ndarray,
             size: np.ndarray, stride: np.ndarray,
             bucket_bytes: float = BUCKET_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """(all buckets' seconds, the last bucket's seconds) of reducing `total_bytes` in equal
    buckets of at most `bucket_bytes`."""
    total = np.asarray(total_bytes, dtype=float)
    buckets = np.maximum(np.ceil(total / bucket_bytes), 1.0)
    one = collective(model, cluster, kind, total / buckets, size, stride)
    return one * buckets, one
