"""Collective time by the alpha-beta model over the cluster's slowest crossed level."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from perfcast.errors import InputError
from perfcast.specs import Cluster

__all__ = ["COLLECTIVES", "CollectiveModel", "RingAlphaBeta", "ring_traffic_factor"]

COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv")


@runtime_checkable
class CollectiveModel(Protocol):
    """Seconds for collectives of `message_bytes` (the full buffer) over `group_size` GPUs."""

    def collective_times(self, kind: np.ndarray, message_bytes: np.ndarray,
                         group_size: np.ndarray, cluster: Cluster) -> np.ndarray: ...


def ring_traffic_factor(kind: str, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bytes each GPU sends per message byte, sequential latency steps) for a ring.

    Patarasuk & Yuan 2009: ring all-reduce sends 2(N-1)/N of the buffer in 2(N-1) steps;
    all-gather and reduce-scatter are one half of it; all-to-all sends (N-1)/N directly.
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
            traffic, steps = ring_traffic_factor(k, group[rows])
            for g in np.unique(group[rows]):
                sel = rows & (group == g)
                link = cluster.link_for(int(g))
                t, s = ring_traffic_factor(k, np.array([g]))
                out[sel] = (link.collective_base_s + s[0] * link.latency_s
                            + t[0] * size[sel] / (link.bandwidth_bps * link.bus_efficiency))
            del traffic, steps
        return np.where(group > 1, out, 0.0)
