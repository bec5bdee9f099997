"""`collective`: one collective's time and bandwidths, by algorithm (NCCL conventions)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field, field_validator

from perfcast.api._base import Request, register
from perfcast.api._choices import Hardware
from perfcast.api._units import MAX_GPUS
from perfcast.comm import (
    COLLECTIVES,
    NcclModel,
    algorithm_choice,
    bus_bandwidth_factor,
    network_from_sendrecv,
)
from perfcast.errors import InputError, close_matches
from perfcast.specs import Cluster, cluster_for, get_cluster, get_device
from perfcast.specs._cluster import FABRIC_DEFAULTS, with_fabric

__all__ = ["CollectiveHardware", "CollectiveRequest", "CollectiveResult", "ResolvedCollective",
           "parse_bytes"]

_UNITS = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_FORMS = "a number of bytes (1e6, 4096) or with a unit: 64KiB, 64MiB, 1GB, 1.5GiB"
# The buffer of one collective lives in each GPU's memory, and no GPU holds 1 TB (the largest
# hold a few hundred GB): a bigger message is a typo (1e30 would print a 31-digit time).
MAX_MESSAGE_BYTES = 1e12


def parse_bytes(text: str) -> float:
    """Bytes from '1e6', '4096', '64MiB', '1GB', '1.5 GiB' (KB/MB/GB/TB decimal, KiB/MiB/GiB/
    TiB binary), at most MAX_MESSAGE_BYTES (1 TB: more than any GPU's memory holds)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise InputError("bytes", f"cannot read {text!r}", _FORMS)
    value = float(match.group(1)) * _UNITS[unit]
    if not math.isfinite(value) or value <= 0:
        raise InputError("bytes", f"must be > 0, got {text!r}", _FORMS)
    if value > MAX_MESSAGE_BYTES:
        raise InputError("bytes", f"{text!r} is {value:.3g} bytes, over the 1 TB bound (more "
                         "than any GPU's memory holds)", "<= 1TB")
    return value


class CollectiveHardware(Hardware):
    """A catalog GPU or a cluster preset, and how many nodes the group spans."""

    nodes: int | None = Field(None, ge=1, le=MAX_GPUS, description="Nodes the group spans "
                              "(default: as few as hold it).")
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

    def machines(self, gpus: int) -> Cluster:
        """The machines of a group of `gpus` spread over `nodes` (an even split), with the
        network's fabric as given."""
        if (self.gpu is None) == (self.cluster is None):
            raise InputError("gpu", "give exactly one of --gpu and --cluster",
                             "--gpu NAME or --cluster PRESET")
        preset = self.cluster
        base = (get_cluster(preset, gpus) if preset is not None
                else cluster_for(get_device(self.gpu), gpus))
        box = _spread(base, gpus, self.nodes)
        given = self.network_options()
        if given and gpus <= box.gpus_per_node:
            raise InputError(given[0], f"the {gpus} GPUs sit on one {box.name} node, so the "
                             "network is never crossed", "--nodes 2 or more, or leave "
                             f"--{given[0].replace('_', '-')} out")
        return _fabric(box, self)

    def network_options(self) -> list[str]:
        """The network options given (that differ from their defaults)."""
        unset = {**FABRIC_DEFAULTS, "sendrecv_latency_us": None, "sendrecv_gbps": None,
                 "gpus_per_nic": None}
        return [name for name in ("sharp", "oversubscription", "nodes_per_leaf",
                                  "sendrecv_latency_us", "sendrecv_gbps", "gpus_per_nic")
                if getattr(self, name) != unset[name]]


_MEASURED = {"sendrecv_latency": "sendrecv_latency_us", "sendrecv_bandwidth": "sendrecv_gbps"}


def _fabric(cluster: Cluster, hardware: CollectiveHardware) -> Cluster:
    """`cluster` with the fabric options that differ from their defaults on its network, the
    adapters shared as --gpus-per-nic says and the network measured by --sendrecv-*; a
    refusal names the option."""
    given = {name: getattr(hardware, name) for name in hardware.network_options()
             if name in FABRIC_DEFAULTS}
    try:
        return _measured(_adapters(with_fabric(cluster, **given), hardware.gpus_per_nic),
                         hardware)
    except InputError as exc:
        field = _MEASURED.get(exc.field, exc.field.removeprefix("inter_node."))
        raise InputError(field, exc.problem, exc.allowed) from None


def _adapters(cluster: Cluster, gpus_per_nic: int | None) -> Cluster:
    """`cluster` with `gpus_per_nic` GPUs sharing each network adapter (None: as it is)."""
    if gpus_per_nic is None:
        return cluster
    if cluster.inter_node is None:
        raise InputError("gpus_per_nic", f"{cluster.name} has no inter-node network", "unset")
    link = cluster.inter_node.model_copy(update={"gpus_per_nic": gpus_per_nic})
    return cluster.model_copy(update={"inter_node": link})


def _measured(cluster: Cluster, hardware: CollectiveHardware) -> Cluster:
    """`cluster` with its network from the 2-node send/recv the user measured, if given."""
    latency_us, gbps = hardware.sendrecv_latency_us, hardware.sendrecv_gbps
    if latency_us is None and gbps is None:
        return cluster
    if latency_us is None or gbps is None:
        missing = "sendrecv_latency_us" if latency_us is None else "sendrecv_gbps"
        raise InputError(missing, "the measured network needs both the send/recv latency and "
                         "its rate", "both --sendrecv-latency-us and --sendrecv-gbps")
    return network_from_sendrecv(cluster, latency_us * 1e-6, gbps * 1e9)


def _spread(base: Cluster, gpus: int, nodes: int | None) -> Cluster:
    """`base` with `gpus` split evenly over `nodes` (as it is when nodes is None)."""
    if nodes is None:
        return base
    if nodes < 1 or gpus % nodes:
        raise InputError("nodes", f"{gpus} GPUs do not split evenly over {nodes} nodes",
                         f"a divisor of {gpus}")
    per_node = gpus // nodes
    if per_node > base.gpus_per_node:
        raise InputError("nodes", f"{per_node} GPUs per node, but a {base.name} node holds "
                         f"{base.gpus_per_node}", f">= {math.ceil(gpus / base.gpus_per_node)}")
    if nodes > 1 and base.inter_node is None:
        raise InputError("nodes", f"{base.name} has no inter-node network", "1")
    return base.model_copy(update={"gpus_per_node": per_node, "num_nodes": nodes})


class CollectiveRequest(Request):
    """Seconds, algorithm and bus bandwidth of one collective over a group of GPUs."""

    command = "collective"
    op: str = Field(description=f"Collective: {', '.join(COLLECTIVES)}.")
    num_gpus: int = Field(le=MAX_GPUS, description="GPUs in the group.")
    message: str = Field(alias="bytes", description="Message size (the whole buffer, "
                         "nccl-tests' size): 1e6, 64MiB, 1GB.")
    algorithm: str = Field("auto", description="NCCL algorithm, or auto (the fastest).")
    hardware: CollectiveHardware = CollectiveHardware()

    @field_validator("op", mode="before")
    @classmethod
    def _spelling(cls, op: object) -> object:
        """torch.distributed's and nccl-tests' spellings (`all_reduce`, `all-reduce`,
        `all_reduce_perf`, `all_to_all`) name the same collectives as perfcast's."""
        if not isinstance(op, str):
            return op
        key = re.sub(r"[-_\s]", "", op.strip().lower()).removesuffix("perf")
        return key if key in COLLECTIVES else op


@dataclass(frozen=True)
class ResolvedCollective:
    request: CollectiveRequest
    size_bytes: float
    machines: Cluster
    model: NcclModel


def _check(op: str, num_gpus: int) -> None:
    if op not in COLLECTIVES:
        hint = close_matches(op, COLLECTIVES) or list(COLLECTIVES)
        raise InputError("op", f"unknown collective {op!r}; did you mean {', '.join(hint)}?",
                         COLLECTIVES)
    if num_gpus < 2:
        raise InputError("num_gpus", f"a collective needs >= 2 GPUs, got {num_gpus}", ">= 2")
    if op == "sendrecv" and num_gpus != 2:
        raise InputError("num_gpus", "send/recv is between 2 GPUs (--nodes 2 puts them on two "
                         "nodes)", "2")


def resolve_collective(request: CollectiveRequest) -> ResolvedCollective:
    _check(request.op, request.num_gpus)
    size = parse_bytes(request.message)
    box = request.hardware.machines(request.num_gpus)
    return ResolvedCollective(request, size, box, NcclModel(request.algorithm))


@dataclass(frozen=True)
class CollectiveResult:
    """The collective's time with the chosen algorithm, and every algorithm's time."""

    request: CollectiveRequest
    size_bytes: float
    machines: Cluster
    algorithm: str
    time_s: float
    algorithm_times_s: dict[str, float]

    @property
    def algbw_gbps(self) -> float:
        """nccl-tests' algorithm bandwidth: the buffer over the time."""
        return self.size_bytes / self.time_s / 1e9

    @property
    def busbw_gbps(self) -> float:
        """nccl-tests' bus bandwidth: algbw times the collective's traffic factor."""
        r = self.request
        return self.algbw_gbps * bus_bandwidth_factor(r.op, r.num_gpus)

    def payload(self) -> dict[str, Any]:
        r, box = self.request, self.machines
        return {"op": r.op, "num_gpus": r.num_gpus, "nodes": box.num_nodes,
                "bytes": self.size_bytes, "cluster": box.name, "gpu": box.device.name,
                "algorithm": self.algorithm, "time_s": self.time_s,
                "algbw_gbps": self.algbw_gbps, "busbw_gbps": self.busbw_gbps,
                "network": _network(box)}


def _network(box: Cluster) -> dict[str, Any] | None:
    """The network priced (None on a cluster without one): adapter rate, per-GPU stream rate
    (None: the adapter's), hop latency and adapters' sharing."""
    link = box.inter_node
    if link is None:
        return None
    flow = link.flow_bandwidth_bps
    return {"adapter_gbps": link.bandwidth_bps / 1e9, "hop_latency_us": link.latency_s * 1e6,
            "stream_gbps": None if flow is None else flow / 1e9,
            "gpus_per_nic": link.gpus_per_nic}


def execute_collective(r: ResolvedCollective) -> CollectiveResult:
    req = r.request
    args = (np.array([req.op], dtype=object), np.array([r.size_bytes]),
            np.array([float(req.num_gpus)]), r.machines)
    time_s = float(r.model.collective_times(*args)[0])
    chosen = str(algorithm_choice(*args)[0]) if req.algorithm == "auto" else req.algorithm
    times = {name: float(t[0]) for name, t in r.model.algorithm_times(*args).items()}
    return CollectiveResult(req, r.size_bytes, r.machines, chosen, time_s, times)


register(CollectiveRequest, resolve_collective, execute_collective)
