"""NCCL-style collectives by algorithm over a cluster's two levels, vectorised over rows.

Every formula is alpha-beta: a fixed cost, sequential steps x alpha, and the bytes each GPU
(or each node's network) must move over the bandwidth it gets. Intra-node terms come from the
GPU's measured NCCL fit (comm/data/nccl_fits.json) where there is one, else from the link's
constants (as RingAlphaBeta prices them); inter-node terms from the cluster's network link.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from perfcast.comm._alphabeta import COLLECTIVES, one_shot_times
from perfcast.comm._fits import LinkFit, shipped_link_fits
from perfcast.comm._levels import A2A, AG, AR, P2P, RS, Levels
from perfcast.errors import InputError
from perfcast.specs import Cluster

__all__ = ["ALGORITHMS", "NcclModel", "algorithm_choice", "bus_bandwidth_factor",
           "default_collective_model"]

ALGORITHMS = ("auto", "ring", "tree", "direct", "hierarchical", "nvls", "collnet")
SUPPORTED = {"ring": ("allreduce", "allgather", "reducescatter", "broadcast"),
             "tree": ("allreduce",),
             "hierarchical": ("allreduce", "allgather", "reducescatter"),
             "direct": ("allreduce", "alltoall", "sendrecv"),
             "nvls": ("allreduce",),
             "collnet": ("allreduce",)}
_NVLS_NEEDS = ("nvls needs NVLink SHARP (an NVSwitch that reduces in the switch: HGX "
               "H100/H200/B200/B300, GB200/GB300 NVL72; not A100, PCIe or xGMI) and 3 or more "
               "GPUs inside one NVLink domain")
_COLLNET_NEEDS = ("collnet is NCCL's in-network (InfiniBand SHARP) all-reduce: it needs a "
                  "network with sharp and a group spanning 2 or more nodes")
# What `auto` chooses among. All-reduce: what NCCL's tuner chooses among (src/graph/tuning.cc:
# tree, ring, CollNet, NVLS); NCCL has no node-then-network all-reduce on a plain network, so
# hierarchical (a framework's 2D all-reduce) is priced for all-reduce only when named.
# All-gather / reduce-scatter keep the ring or the node-then-network schedule, whichever is
# faster (no multi-node measurement of them in the shipped data says otherwise).
AUTO_CHOICES = ("ring", "tree", "hierarchical", "nvls", "collnet")


def _auto_candidate(times: dict[str, np.ndarray], name: str, ar: np.ndarray) -> np.ndarray:
    """An algorithm's times as `auto` sees them: hierarchical all-reduce left out."""
    return np.where(ar, np.inf, times[name]) if name == "hierarchical" else times[name]

_CODE = {name: i for i, name in enumerate(COLLECTIVES)}


def _codes(kind: np.ndarray) -> np.ndarray:
    import pandas as pd  # imported on first use: most forecasts never price a collective

    codes, names = pd.factorize(np.asarray(kind, dtype=object), sort=False)
    lookup = []
    for name in names:
        if name not in _CODE:
            raise InputError("collective", f"unknown collective {name!r}", COLLECTIVES)
        lookup.append(_CODE[name])
    return np.asarray(lookup, dtype=np.int64)[codes] if len(codes) else codes


class NcclModel:
    """Seconds per collective as NCCL runs it: `algorithm="auto"` takes, per row, the fastest
    of the all-reduce algorithms NCCL's tuner chooses among: ring, double binary tree, on
    NVSwitch systems with NVLink SHARP inside one NVLink domain NVLS and, across nodes on a
    network with InfiniBand SHARP, CollNet (hierarchical all-reduce only when named); ring and
    hierarchical for all-gather and reduce-scatter, direct peer-to-peer for all-to-all and
    send/recv and a pipelined ring for broadcast. A named algorithm prices only the
    collectives (and clusters) it applies to. `fits`: GPU name -> LinkFit (default: the
    shipped fits)."""

    def __init__(self, algorithm: str = "auto", fits: Mapping[str, LinkFit] | None = None):
        if algorithm not in ALGORITHMS:
            raise InputError("algorithm", f"unknown algorithm {algorithm!r}", ALGORITHMS)
        self.algorithm = algorithm
        self.fits = dict(shipped_link_fits() if fits is None else fits)

    def collective_times(self, kind: np.ndarray, message_bytes: np.ndarray,
                         group_size: np.ndarray, cluster: Cluster) -> np.ndarray:
        times = self.algorithm_times(kind, message_bytes, group_size, cluster)
        if self.algorithm == "auto":
            return times["auto"]
        out = times[self.algorithm]
        bad = ~np.isfinite(out)
        if bad.any():
            kinds = sorted(set(np.asarray(kind, dtype=object)[bad]))
            allowed = [a for a in SUPPORTED if np.isfinite(times[a][bad]).all()]
            raise InputError("algorithm", f"{self.algorithm} does not price "
                             f"{', '.join(kinds)} here{_why(self.algorithm, kinds, cluster)}",
                             ["auto", *allowed])
        return out

    def algorithm_times(self, kind: np.ndarray, message_bytes: np.ndarray,
                        group_size: np.ndarray, cluster: Cluster) -> dict[str, np.ndarray]:
        """Seconds per row for each algorithm (inf where it does not apply) and "auto"."""
        code = _codes(kind)
        size = np.asarray(message_bytes, dtype=float)
        group = np.asarray(group_size, dtype=float)
        if (size < 0).any() or (group < 0).any():
            raise InputError("message_bytes", "bytes and group sizes must be >= 0", ">= 0")
        lv = Levels(cluster, self.fits.get(cluster.device.name), group)
        times = {name: np.full(len(size), np.inf)
                 for name in ("ring", "tree", "direct", "hierarchical", "nvls", "collnet")}
        ar, a2a, p2p = code == AR, code == A2A, code == P2P
        _fill(times["ring"], ~(a2a | p2p), lambda sub, r: sub.ring(code.take(r), size.take(r)), lv)
        _fill(times["tree"], ar, lambda sub, r: sub.tree_allreduce(size.take(r)), lv)
        _fill(times["nvls"], ar, lambda sub, r: sub.nvls_allreduce(size.take(r)), lv)
        _fill(times["collnet"], ar & lv.multi,
              lambda sub, r: sub.collnet_allreduce(size.take(r)), lv)
        hier = ar | (code == AG) | (code == RS)
        times["hierarchical"] = np.where(hier, times["ring"], np.inf)
        _fill(times["hierarchical"], hier & lv.multi,
              lambda sub, r: sub.hierarchical(code.take(r), size.take(r)), lv)
        _fill(times["direct"], a2a, lambda sub, r: sub.alltoall(size.take(r)), lv)
        _fill(times["direct"], p2p, lambda sub, r: sub.sendrecv(size.take(r)), lv)
        one_node = ar & ~lv.multi
        if one_node.any():
            times["direct"][one_node] = one_shot_times(cluster.intra_node, size[one_node],
                                                       group[one_node])
        best = np.minimum.reduce([_auto_candidate(times, a, ar) for a in AUTO_CHOICES])
        times["auto"] = np.where(a2a | p2p, times["direct"], best)
        alone = group <= 1
        return {name: np.where(alone, 0.0, t) for name, t in times.items()}


def _why(algorithm: str, kinds: list[str], cluster: Cluster) -> str:
    """The reason a named algorithm cannot price these rows, where there is a specific one."""
    if algorithm == "direct" and "allreduce" in kinds:
        return " (direct all-reduce is the one-shot kernel: one node, measured one-shot terms)"
    if algorithm == "nvls" and kinds == ["allreduce"]:
        sharp = cluster.intra_node.nvls_efficiency is not None
        where = ("this group has 2 GPUs or spans more than one NVLink domain" if sharp
                 else f"{cluster.name} has no NVLink SHARP")
        return f": {_NVLS_NEEDS}; {where}"
    if algorithm == "collnet" and kinds == ["allreduce"]:
        sharp = cluster.inter_node is not None and cluster.inter_node.sharp
        where = ("this group sits on one node" if sharp
                 else f"{cluster.name}'s network has no SHARP")
        return f": {_COLLNET_NEEDS}; {where}"
    return ""


def _fill(out: np.ndarray, mask: np.ndarray, price, levels: Levels) -> None:
    """out[mask] = price(levels of those rows, their positions): each formula runs on its
    rows only."""
    rows = np.flatnonzero(mask)
    if len(rows):
        out[rows] = price(levels.subset(rows), rows)


def algorithm_choice(kind: np.ndarray, message_bytes: np.ndarray, group_size: np.ndarray,
                     cluster: Cluster, fits: Mapping[str, LinkFit] | None = None) -> np.ndarray:
    """The algorithm `NcclModel("auto")` picks per row (ties: ring, tree, hierarchical, nvls,
    collnet; "none" for a group of one GPU)."""
    times = NcclModel("auto", fits).algorithm_times(kind, message_bytes, group_size, cluster)
    names = np.array([*AUTO_CHOICES, "direct"], dtype=object)
    code = _codes(kind)
    stack = np.vstack([_auto_candidate(times, n, code == AR) for n in names])
    native_direct = (code == A2A) | (code == P2P)
    stack[-1] = np.where(native_direct, stack[-1], np.inf)
    picks = names[np.argmin(stack, axis=0)]
    return np.where(np.asarray(group_size, dtype=float) <= 1, "none", picks).astype(object)


def default_collective_model() -> NcclModel:
    """The collective model training and serving forecasts should use."""
    return NcclModel("auto")


def bus_bandwidth_factor(kind: str, n: float) -> float:
    """busbw / algbw (nccl-tests PERFORMANCE.md conventions): 2(n-1)/n for all-reduce,
    (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for broadcast and send/recv."""
    if kind not in _CODE:
        raise InputError("collective", f"unknown collective {kind!r}", COLLECTIVES)
    if n <= 1:
        return 0.0
    if kind == "allreduce":
        return 2 * (n - 1) / n
    return (n - 1) / n if kind in ("allgather", "reducescatter", "alltoall") else 1.0
