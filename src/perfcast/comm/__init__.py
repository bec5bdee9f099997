"""Collectives (all-reduce, all-gather, reduce-scatter, all-to-all, send/recv, broadcast) in
seconds: NCCL's algorithms over the cluster's levels (NcclModel, the default), the plain ring
(RingAlphaBeta) and serving engines' one-shot all-reduce (CustomAllReduce)."""

from perfcast.comm._alphabeta import (
    COLLECTIVES,
    CollectiveModel,
    CustomAllReduce,
    RingAlphaBeta,
    one_shot_times,
    ring_traffic_factor,
)
from perfcast.comm._fits import LinkFit, nvls_note, shipped_link_fits
from perfcast.comm._fitting import fit_link, fit_p2p
from perfcast.comm._nccl import (
    ALGORITHMS,
    NcclModel,
    algorithm_choice,
    bus_bandwidth_factor,
    default_collective_model,
)

__all__ = ["ALGORITHMS", "COLLECTIVES", "CollectiveModel", "CustomAllReduce", "LinkFit",
           "NcclModel", "RingAlphaBeta", "algorithm_choice", "bus_bandwidth_factor",
           "default_collective_model", "fit_link", "fit_p2p", "nvls_note", "one_shot_times",
           "ring_traffic_factor", "shipped_link_fits"]
