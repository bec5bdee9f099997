"""A cluster's network described by what a user can measure between two of its nodes: a
send/recv (nccl-tests sendrecv_perf) latency and large-message rate."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from perfcast.comm._fits import LinkFit
from perfcast.comm._nccl import NcclModel
from perfcast.errors import InputError
from perfcast.specs import Cluster

__all__ = ["network_from_sendrecv"]


def network_from_sendrecv(cluster: Cluster, latency_s: float, bandwidth_bps: float,
                          fits: Mapping[str, LinkFit] | None = None) -> Cluster:
    """`cluster` with its network as measured by a 2-node send/recv, t = latency + bytes /
    bandwidth: each GPU's network stream runs at `bandwidth_bps` (flow_bandwidth_bps, which
    also sets how many streams a node drives: comm/_levels.py) and a network hop costs what
    makes NcclModel's 2-node send/recv take `latency_s` at zero bytes (the measured latency
    less the GPU's own send/recv cost, which every send/recv already pays). The adapters'
    rate stays the cluster's. A latency under that own cost, or a rate over the adapter's,
    is refused (fields sendrecv_latency, sendrecv_bandwidth)."""
    inter = cluster.inter_node
    if inter is None:
        raise InputError("sendrecv_latency", f"{cluster.name} has no inter-node network to "
                         "describe", "a cluster with an inter-node network")
    pair = cluster.model_copy(update={"gpus_per_node": 1, "num_nodes": 2})
    zero = NcclModel(fits=fits).collective_times(np.array(["sendrecv"], dtype=object),
                                                 np.zeros(1), np.array([2.0]), pair)[0]
    own = float(zero) - inter.latency_s
    if not latency_s >= own:
        raise InputError("sendrecv_latency", f"{latency_s * 1e6:.3g} us is under the "
                         f"{own * 1e6:.3g} us one send/recv costs between two "
                         f"{cluster.device.name} on one node (the network's hop cannot be "
                         "negative)", f">= {own * 1e6:.3g} us")
    if not 0 < bandwidth_bps <= inter.bandwidth_bps:
        raise InputError("sendrecv_bandwidth", f"{bandwidth_bps / 1e9:.4g} GB/s exceeds the "
                         f"adapter's {inter.bandwidth_bps / 1e9:.4g} GB/s (a stream cannot "
                         "outrun its adapter)", f"(0, {inter.bandwidth_bps / 1e9:.4g}] GB/s")
    link = inter.model_copy(update={"latency_s": latency_s - own,
                                    "flow_bandwidth_bps": bandwidth_bps})
    return cluster.model_copy(update={"inter_node": link})
