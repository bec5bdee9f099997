"""Interconnect: links between GPUs and the clusters built from them."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from perfcast.errors import InputError, from_validation_error
from perfcast.specs._device import Device

__all__ = ["FABRIC_DEFAULTS", "Cluster", "Link", "LinkKind", "with_fabric"]


class LinkKind(StrEnum):
    NVLINK = "nvlink"
    NVSWITCH = "nvswitch"
    PCIE = "pcie"
    XGMI = "xgmi"
    INFINIBAND = "infiniband"
    ETHERNET = "ethernet"


class Link(BaseModel):
    """One level of the interconnect, as seen by one GPU."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: LinkKind
    bandwidth_bps: float = Field(gt=0, description="per GPU, per direction, bytes/s")
    latency_s: float = Field(ge=0, description="one-hop latency (alpha of the alpha-beta model)")
    collective_base_s: float = Field(
        default=0.0, ge=0, description="fixed cost of one collective on this level (kernel "
        "launch, synchronisation), on top of the per-step alpha")
    bus_efficiency: float = Field(
        default=1.0, gt=0, le=1, description="share of bandwidth_bps a large collective "
        "achieves (measured bus bandwidth / link bandwidth)")
    one_shot_base_s: float | None = Field(
        default=None, ge=0, description="fixed cost of a one-shot all-reduce (every GPU "
        "reads its peers' buffers directly: the custom all-reduce of TensorRT-LLM, vLLM and "
        "SGLang on NVLink); None where none was measured")
    one_shot_peer_s: float = Field(
        default=0.0, ge=0, description="one-shot all-reduce cost per additional peer")
    nvls_efficiency: float | None = Field(
        default=None, gt=0, le=1, description="NVLink SHARP (in-switch reduction, NCCL's NVLS "
        "all-reduce): its rate as a share of the link's point-to-point rate (NCCL "
        "src/graph/tuning.cc nvlsEfficiency: Hopper 0.85, Blackwell 0.74); None where the "
        "switch has no SHARP (A100's NVSwitch, PCIe, xGMI)")
    gpus_per_nic: int = Field(
        default=1, gt=0, description="GPUs sharing one network adapter (inter-node links; "
        "bandwidth_bps is then per adapter): 1 = an adapter per GPU, as in DGX/HGX nodes")
    # The network's fabric (inter-node links only; the defaults describe today's model: every
    # GPU reaches its adapters' full rate over one non-blocking tier, no in-network reduction).
    flow_bandwidth_bps: float | None = Field(
        default=None, gt=0, description="network: the rate one GPU's point-to-point stream "
        "reaches between two nodes (measured: nccl-tests sendrecv_perf), bytes/s per "
        "direction; caps each GPU's share of its node's adapters. None: the adapter's rate "
        "(bandwidth_bps x bus_efficiency)")
    oversubscription: float = Field(
        default=1.0, ge=1, description="network: leaf-to-spine taper (a leaf's downlink / "
        "uplink bandwidth); a group spanning more than nodes_per_leaf nodes gets the "
        "adapters' bandwidth / oversubscription (the worst case: every leaf's nodes talking "
        "across the spine at once, as concurrent data-parallel groups do)")
    nodes_per_leaf: int | None = Field(
        default=None, gt=0, description="network: nodes one leaf switch reaches without the "
        "spine (rail-optimised: the rail-aligned group of a scalable unit, 64 DGX B300 in the "
        "DGX SuperPOD reference architecture, docs.nvidia.com/dgx-superpod/reference-"
        "architecture/scalable-infrastructure-b300/latest/network-fabrics.html: 'traffic "
        "between nodes, or between rails, traverses the spine'); None: one non-blocking tier")
    rail_optimized: bool = Field(
        default=True, description="network: adapter i of every node of a leaf group sits on "
        "leaf i (traffic between GPUs of the same rank stays one switch away; NCCL's PXN moves "
        "cross-rail traffic over NVLink first). SHARP needs it (NVIDIA HPC-X NCCL-RDMA-SHARP "
        "plugins, docs.nvidia.com/networking/display/hpcxv226/NCCL-RDMA-SHARP-Plugins: leaf "
        "switches connected to the same HCA rail from each server); perfcast prices both "
        "designs alike otherwise (NCCL's rings, trees and PXN all-to-all stay on rails)")
    sharp: bool = Field(
        default=False, description="network: InfiniBand SHARP in-network reduction, used by "
        "NCCL's CollNet all-reduce (NCCL_COLLNET_ENABLE=1 with the NCCL-RDMA-SHARP plugin; "
        "ConnectX-6 HDR and Quantum HDR switches or later: docs.nvidia.com/networking/display/"
        "sharpltsv391/using+nvidia+sharp+with+nvidia+nccl)")

    @model_validator(mode="after")
    def _fabric_is_consistent(self) -> Link:
        """Fabric fields that contradict each other or the link kind are refused."""
        problem = self.fabric_problem()
        if problem is not None:
            raise ValueError(f"{problem[0]}: {problem[1]}")
        return self

    def fabric_problem(self) -> tuple[str, str] | None:
        """(field, why) of the first contradiction among the fabric fields, else None."""
        if self.flow_bandwidth_bps is not None and self.flow_bandwidth_bps > self.bandwidth_bps:
            return ("flow_bandwidth_bps", f"{self.flow_bandwidth_bps:.4g} exceeds the "
                    f"adapter's bandwidth_bps {self.bandwidth_bps:.4g}")
        if self.oversubscription > 1 and self.nodes_per_leaf is None:
            return ("nodes_per_leaf", "oversubscription > 1 needs nodes_per_leaf (how many "
                    "nodes a leaf reaches before traffic crosses the tapered spine)")
        if self.sharp and self.kind is not LinkKind.INFINIBAND:
            return ("sharp", f"InfiniBand SHARP needs an infiniband link, not "
                    f"{self.kind.value}")
        if self.sharp and not self.rail_optimized:
            return ("sharp", "SHARP needs a rail-optimised fabric (NVIDIA HPC-X: leaf "
                    "switches connected to the same HCA rail from each server)")
        return None

    def describes_fabric(self) -> bool:
        """Whether any fabric field differs from its default (only a network link may)."""
        return any(getattr(self, name) != FABRIC_DEFAULTS[name] for name in FABRIC_DEFAULTS)


class Cluster(BaseModel):
    """Identical nodes of identical GPUs: an intra-node level and an optional inter-node level."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    device: Device
    gpus_per_node: int = Field(gt=0)
    num_nodes: int = Field(default=1, gt=0)
    intra_node: Link
    inter_node: Link | None = None
    sources: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _multi_node_needs_network(self) -> Cluster:
        if self.num_nodes > 1 and self.inter_node is None:
            raise ValueError("inter_node link is required when num_nodes > 1")
        if self.intra_node.describes_fabric():
            raise ValueError("fabric fields (flow_bandwidth_bps, oversubscription, "
                             "nodes_per_leaf, rail_optimized, sharp) describe the network: "
                             "set them on inter_node, not intra_node")
        return self

    @property
    def num_gpus(self) -> int:
        return self.gpus_per_node * self.num_nodes

    def link_for(self, group_size: int) -> Link:
        """The slowest level a collective over `group_size` consecutive GPUs must cross."""
        if group_size <= self.gpus_per_node or self.inter_node is None:
            return self.intra_node
        return self.inter_node


FABRIC_DEFAULTS = {name: Link.model_fields[name].default for name in (
    "flow_bandwidth_bps", "oversubscription", "nodes_per_leaf", "rail_optimized", "sharp")}


def with_fabric(cluster: Cluster, **fabric) -> Cluster:
    """`cluster` with fabric fields set on its network link; a bad value (or a cluster without
    a network) is an InputError naming `inter_node.<field>`."""
    unknown = sorted(set(fabric) - set(FABRIC_DEFAULTS))
    if unknown:
        raise InputError(f"inter_node.{unknown[0]}", "not a fabric field", list(FABRIC_DEFAULTS))
    if not fabric:
        return cluster
    if cluster.inter_node is None:
        raise InputError(f"inter_node.{next(iter(fabric))}", f"{cluster.name} has no "
                         "inter-node network to describe", "a cluster with inter_node")
    fields = {**cluster.inter_node.model_dump(), **fabric}
    try:
        link = Link(**fields)
    except ValidationError as exc:
        problem = None if exc.errors()[0]["loc"] else Link.model_construct(
            **fields).fabric_problem()  # _fabric_is_consistent's (field, why)
        if problem is not None:
            raise InputError(f"inter_node.{problem[0]}", problem[1]) from None
        raise from_validation_error(exc, prefix="inter_node.") from None
    return cluster.model_copy(update={"inter_node": link})
