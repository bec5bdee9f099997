"""Collectives (all-reduce, all-gather, reduce-scatter, all-to-all, send/recv) in seconds."""

from perfcast.comm._alphabeta import (
    COLLECTIVES,
    CollectiveModel,
    CustomAllReduce,
    RingAlphaBeta,
    ring_traffic_factor,
)

__all__ = ["COLLECTIVES", "CollectiveModel", "CustomAllReduce", "RingAlphaBeta",
           "ring_traffic_factor"]
