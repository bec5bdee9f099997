"""Collective time by the alpha-beta model over the cluster's slowest crossed level."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from perfcast.errors import InputError
from perfcast.specs import Cluster, Link

__all__ = ["COLLECTIVES", "CollectiveModel", "CustomAllReduce", "RingAlphaBeta",
           "one_shot_times", "ring_traffic_factor"]

COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv", "broadcast")


@runtime_checkable
class CollectiveModel(Protocol):
    """Seconds for collectives of `message_bytes` (the full buffer) over `group_size` GPUs."""

    def collective_times(self, kind: np.ndarray, message_bytes: np.ndarray,
                         group_size: np.ndarray, cluster: Cluster) -> np.ndarray: ...


def ring_traffic_factor(kind: str, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bytes each GPU sends per message byte, sequential latency steps) for a ring.

    Patarasuk & Yuan 2009: ring all-reduce sends 2(N-1)/N of the buffer in 2(N-1) steps;
    all-gather and reduce-scatter are one half of it; all-to-all sends (N-1)/N directly;
    a pipelined (chain) broadcast forwards the whole buffer once in N-1 steps.
    """
    n = np.asarray(n, dtype=float)
    if kind == "allreduce":
        return 2 * (n - 1) / n, 2 * (n - 1)
    if kind in ("allgather", "reducescatter"):
        return (n - 1) / n, n - 1
    if kind == "alltoall":
        return (n - 1) / n, n - 1
    if kind == "sendrecv":
        return np.ones_like(n), np.ones_like(n)
    if kind == "broadcast":
        return np.ones_like(n), n - 1
    raise InputError("collective", f"unknown collective {kind!r}", COLLECTIVES)


class RingAlphaBeta:
    """t = base + steps x alpha + traffic x bytes / (bandwidth x efficiency), over the slowest
    level the group spans (base, alpha and efficiency per link: fitted on measured NCCL
    collectives where the catalog has them, scripts/fit_collectives.py)."""

    def collective_times(self, kind: np.ndarray, message_bytes: np.ndarray,
                         group_size: np.ndarray, cluster: Cluster) -> np.ndarray:
        kind = np.asarray(kind, dtype=object)
        size = np.asarray(message_bytes, dtype=float)
        group = np.asarray(group_size, dtype=float)
        out = np.zeros(len(size))
        for k in np.unique(kind):
            rows = kind == k
            for g in np.unique(group[rows]):
                sel = rows & (group == g)
                link = cluster.link_for(int(g))
                t, s = ring_traffic_factor(k, np.array([g]))
                out[sel] = (link.collective_base_s + s[0] * link.latency_s
                            + t[0] * size[sel] / (link.bandwidth_bps * link.bus_efficiency))
        return np.where(group > 1, out, 0.0)


class CustomAllReduce:
    """Serving engines' tensor-parallel all-reduce: a one-shot kernel where every GPU reads
    its N-1 peers' buffers over NVLink (t = base + (N-1)·peer + (N-1)·bytes / (bandwidth ·
    efficiency)), or NCCL's ring where that is faster (large messages) or the link has no
    measured one-shot terms. Other collectives are the ring's (RingAlphaBeta)."""

    def __init__(self) -> None:
        self.ring = RingAlphaBeta()

    def collective_times(self, kind: np.ndarray, message_bytes: np.ndarray,
                         group_size: np.ndarray, cluster: Cluster) -> np.ndarray:
        kind = np.asarray(kind, dtype=object)
        size = np.asarray(message_bytes, dtype=float)
        group = np.asarray(group_size, dtype=float)
        out = self.ring.collective_times(kind, size, group, cluster)
        for g in np.unique(group[(kind == "allreduce") & (group > 1)]):
            sel = (kind == "allreduce") & (group == g)
            out[sel] = np.minimum(out[sel], one_shot_times(cluster.link_for(int(g)), size[sel],
                                                           np.full(sel.sum(), g)))
        return out


def one_shot_times(link: Link, size: np.ndarray, group: np.ndarray) -> np.ndarray:
    """One-shot all-reduce (every GPU reads its N-1 peers' buffers directly): base + (N-1)
    peer + (N-1) bytes / (bandwidth x efficiency); inf where the link has no measured terms."""
    size, group = np.asarray(size, dtype=float), np.asarray(group, dtype=float)
    if link.one_shot_base_s is None:
        return np.full(len(size), np.inf)
    peers = group - 1
    return (link.one_shot_base_s + peers * link.one_shot_peer_s
            + peers * size / (link.bandwidth_bps * link.bus_efficiency))
