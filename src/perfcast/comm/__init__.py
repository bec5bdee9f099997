"""Collectives (all-reduce, all-gather, reduce-scatter, all-to-all, send/recv, broadcast) in
seconds: NCCL's algorithms over the cluster's levels (NcclModel, the default), the plain ring
(RingAlphaBeta) and serving engines' one-shot all-reduce (CustomAllReduce)."""

from perfcast import _lazy_exports

# Submodule -> the public names it provides, each imported on first use (PEP 562).
_EXPORTS = {
    "_alphabeta": ("COLLECTIVES", "CollectiveModel", "CustomAllReduce", "RingAlphaBeta",
        "one_shot_times", "ring_traffic_factor"),
    "_fits": ("LinkFit", "nvls_note", "shipped_link_fits"),
    "_fitting": ("fit_link", "fit_p2p"),
    "_nccl": ("ALGORITHMS", "NcclModel", "algorithm_choice", "bus_bandwidth_factor",
        "default_collective_model"),
    "_network": ("network_from_sendrecv",),
}
__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)

__all__ = [name for names in _EXPORTS.values() for name in names]  # pinned: tests
