"""Interconnect: links between GPUs and the clusters built from them."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from perfcast.specs._device import Device

__all__ = ["Cluster", "Link", "LinkKind"]


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
        return self

    @property
    def num_gpus(self) -> int:
        return self.gpus_per_node * self.num_nodes

    def link_for(self, group_size: int) -> Link:
        """The slowest level a collective over `group_size` consecutive GPUs must cross."""
        if group_size <= self.gpus_per_node or self.inter_node is None:
            return self.intra_node
        return self.inter_node
