"""The network options of a question that spans nodes (`collective`, `train`): the fabric
(SHARP, leaf-spine taper), how many GPUs share an adapter, and the network as the user
measured it (a 2-node send/recv). The one place where these options become the cluster's
network link."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from perfcast.api._base import Group
from perfcast.api._units import MAX_GPUS
from perfcast.comm import network_from_sendrecv
from perfcast.errors import InputError
from perfcast.specs import Cluster
from perfcast.specs._cluster import FABRIC_DEFAULTS, with_fabric

__all__ = ["NetworkOptions", "network_summary"]

_FABRIC = ("sharp", "oversubscription", "nodes_per_leaf")
_MEASURED = {"sendrecv_latency": "sendrecv_latency_us", "sendrecv_bandwidth": "sendrecv_gbps"}
_UNSET = {**{name: FABRIC_DEFAULTS[name] for name in _FABRIC}, "sendrecv_latency_us": None,
          "sendrecv_gbps": None, "gpus_per_nic": None}


class NetworkOptions(Group):
    """The network between the nodes, where it differs from the preset's spec sheet."""

    sharp: bool = Field(False, description="The network reduces in its switches (InfiniBand "
                        "SHARP through NCCL's CollNet all-reduce).")
    oversubscription: float = Field(1.0, ge=1, le=64, description="Leaf-to-spine taper of the "
                                    "network: a group over more than --nodes-per-leaf nodes "
                                    "gets the adapters' rate / this.")
    nodes_per_leaf: int | None = Field(None, ge=1, le=MAX_GPUS, description="Nodes one leaf "
                                       "switch reaches without the spine (default: one "
                                       "non-blocking tier).")
    sendrecv_latency_us: float | None = Field(
        None, gt=0, le=1e5, description="The network as measured between two nodes (nccl-"
        "tests sendrecv_perf, t = latency + bytes / rate): the latency, us; with "
        "--sendrecv-gbps.")
    sendrecv_gbps: float | None = Field(
        None, gt=0, le=1e4, description="The same measurement's rate (large messages), GB/s "
        "one way: each GPU's network stream; with --sendrecv-latency-us.")
    gpus_per_nic: int | None = Field(None, ge=1, le=64, description="GPUs sharing one "
                                     "network adapter (default: the preset's; 1 on DGX/HGX).")

    def network_options(self) -> list[str]:
        """The network options given (those that differ from their defaults)."""
        return [name for name in _UNSET if getattr(self, name) != _UNSET[name]]

    def apply(self, cluster: Cluster, gpus: int) -> Cluster:
        """`cluster` (sized for `gpus`) with the network these options describe; options
        given for a group that fits one node are refused (the network is never crossed), and
        every refusal names its option."""
        given = self.network_options()
        if given and gpus <= cluster.gpus_per_node:
            raise InputError(given[0], f"the {gpus} GPUs sit on one {cluster.name} node, so "
                             "the network is never crossed", "a group over 2 or more nodes, "
                             f"or leave --{given[0].replace('_', '-')} out")
        fabric = {name: getattr(self, name) for name in given if name in _FABRIC}
        try:
            return self._measured(self._adapters(with_fabric(cluster, **fabric)))
        except InputError as exc:
            field = _MEASURED.get(exc.field, exc.field.removeprefix("inter_node."))
            raise InputError(field, exc.problem, exc.allowed) from None

    def _adapters(self, cluster: Cluster) -> Cluster:
        """`cluster` with gpus_per_nic GPUs sharing each adapter (unset: as it is)."""
        if self.gpus_per_nic is None:
            return cluster
        if cluster.inter_node is None:
            raise InputError("gpus_per_nic", f"{cluster.name} has no inter-node network",
                             "unset")
        link = cluster.inter_node.model_copy(update={"gpus_per_nic": self.gpus_per_nic})
        return cluster.model_copy(update={"inter_node": link})

    def _measured(self, cluster: Cluster) -> Cluster:
        """`cluster` with its network from the user's 2-node send/recv, if given."""
        latency_us, gbps = self.sendrecv_latency_us, self.sendrecv_gbps
        if latency_us is None and gbps is None:
            return cluster
        if latency_us is None or gbps is None:
            missing = "sendrecv_latency_us" if latency_us is None else "sendrecv_gbps"
            raise InputError(missing, "the measured network needs both the send/recv latency "
                             "and its rate", "both --sendrecv-latency-us and --sendrecv-gbps")
        return network_from_sendrecv(cluster, latency_us * 1e-6, gbps * 1e9)


def network_summary(cluster: Cluster) -> dict[str, Any] | None:
    """The network priced (None on a cluster without one): adapter rate, per-GPU stream rate
    (None: the adapter's), hop latency and adapters' sharing."""
    link = cluster.inter_node
    if link is None:
        return None
    flow = link.flow_bandwidth_bps
    return {"adapter_gbps": link.bandwidth_bps / 1e9, "hop_latency_us": link.latency_s * 1e6,
            "stream_gbps": None if flow is None else flow / 1e9,
            "gpus_per_nic": link.gpus_per_nic}
