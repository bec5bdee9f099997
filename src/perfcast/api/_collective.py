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
from perfcast.api._network import NetworkOptions, network_summary
from perfcast.api._units import MAX_GPUS
from perfcast.comm import COLLECTIVES, NcclModel, algorithm_choice, bus_bandwidth_factor
from perfcast.errors import InputError, close_matches
from perfcast.specs import Cluster, cluster_for, get_cluster, get_device

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


class CollectiveHardware(Hardware, NetworkOptions):
    """A catalog GPU or a cluster preset, how many nodes the group spans and the network
    between them."""

    nodes: int | None = Field(None, ge=1, le=MAX_GPUS, description="Nodes the group spans "
                              "(default: as few as hold it).")

    def machines(self, gpus: int) -> Cluster:
        """The machines of a group of `gpus` spread over `nodes` (an even split), with the
        network as given."""
        if (self.gpu is None) == (self.cluster is None):
            raise InputError("gpu", "give exactly one of --gpu and --cluster",
                             "--gpu NAME or --cluster PRESET")
        preset = self.cluster
        base = (get_cluster(preset, gpus) if preset is not None
                else cluster_for(get_device(self.gpu), gpus))
        return self.apply(_spread(base, gpus, self.nodes), gpus)


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
                "network": network_summary(box)}


def execute_collective(r: ResolvedCollective) -> CollectiveResult:
    req = r.request
    args = (np.array([req.op], dtype=object), np.array([r.size_bytes]),
            np.array([float(req.num_gpus)]), r.machines)
    time_s = float(r.model.collective_times(*args)[0])
    chosen = str(algorithm_choice(*args)[0]) if req.algorithm == "auto" else req.algorithm
    times = {name: float(t[0]) for name, t in r.model.algorithm_times(*args).items()}
    return CollectiveResult(req, r.size_bytes, r.machines, chosen, time_s, times)


register(CollectiveRequest, resolve_collective, execute_collective)
