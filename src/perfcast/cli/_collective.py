"""`perfcast collective`: one collective's time and bandwidths, by algorithm."""

from __future__ import annotations

import math
import re
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from perfcast.cli._common import JsonOption, emit_json, guarded
from perfcast.comm import (
    ALGORITHMS,
    COLLECTIVES,
    NcclModel,
    algorithm_choice,
    bus_bandwidth_factor,
)
from perfcast.errors import InputError, close_matches
from perfcast.specs import Cluster, cluster_for, cluster_names, get_cluster, get_device

__all__ = ["collective", "parse_bytes"]

_UNITS = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_FORMS = "a number of bytes (1e6, 4096) or with a unit: 64KiB, 64MiB, 1GB, 1.5GiB"


def parse_bytes(text: str) -> float:
    """Bytes from '1e6', '4096', '64MiB', '1GB', '1.5 GiB' (KB/MB/GB/TB decimal, KiB/MiB/GiB/
    TiB binary)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise InputError("bytes", f"cannot read {text!r}", _FORMS)
    value = float(match.group(1)) * _UNITS[unit]
    if not math.isfinite(value) or value <= 0:
        raise InputError("bytes", f"must be > 0, got {text!r}", _FORMS)
    return value


def _cluster(gpu: str | None, preset: str | None, num_gpus: int, nodes: int | None) -> Cluster:
    if (gpu is None) == (preset is None):
        raise InputError("gpu", "give exactly one of --gpu and --cluster",
                         "--gpu NAME or --cluster PRESET")
    if preset is not None:
        try:
            get_cluster(preset)
        except InputError:  # the catalog's own message points at `perfcast models`
            hint = close_matches(preset, cluster_names()) or cluster_names()[:6]
            raise InputError("cluster", f"unknown cluster {preset!r}; did you mean "
                             f"{', '.join(hint)}?", cluster_names()) from None
    base = (get_cluster(preset, num_gpus) if preset is not None
            else cluster_for(get_device(gpu), num_gpus))
    if nodes is None:
        return base
    if nodes < 1 or num_gpus % nodes:
        raise InputError("nodes", f"{num_gpus} GPUs do not split evenly over {nodes} nodes",
                         f"a divisor of {num_gpus}")
    per_node = num_gpus // nodes
    if per_node > base.gpus_per_node:
        raise InputError("nodes", f"{per_node} GPUs per node, but a {base.name} node holds "
                         f"{base.gpus_per_node}", f">= {math.ceil(num_gpus / base.gpus_per_node)}")
    if nodes > 1 and base.inter_node is None:
        raise InputError("nodes", f"{base.name} has no inter-node network", "1")
    return base.model_copy(update={"gpus_per_node": per_node, "num_nodes": nodes})


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


@guarded
def collective(
    op: Annotated[str, typer.Option(help=f"Collective: {', '.join(COLLECTIVES)}.")],
    num_gpus: Annotated[int, typer.Option(help="GPUs in the group.")],
    message: Annotated[str, typer.Option(
        "--bytes", help="Message size (the whole buffer, nccl-tests' size): 1e6, 64MiB, 1GB.")],
    gpu: Annotated[str | None, typer.Option(help="Catalog GPU (its preset or a generic box)."
                                            )] = None,
    cluster: Annotated[str | None, typer.Option(help="Cluster preset (dgx-h100, ...).")] = None,
    nodes: Annotated[int | None, typer.Option(
        help="Nodes the group spans (default: as few as hold it).")] = None,
    algorithm: Annotated[str, typer.Option(help=f"{', '.join(ALGORITHMS)}.")] = "auto",
    json_out: JsonOption = False,
) -> None:
    """Seconds, algorithm and bus bandwidth of one collective (NCCL conventions)."""
    _check(op, num_gpus)
    size = parse_bytes(message)
    box = _cluster(gpu, cluster, num_gpus, nodes)
    model = NcclModel(algorithm)
    args = (np.array([op], dtype=object), np.array([size]), np.array([float(num_gpus)]), box)
    time_s = float(model.collective_times(*args)[0])
    chosen = str(algorithm_choice(*args)[0]) if algorithm == "auto" else algorithm
    algbw = size / time_s / 1e9
    payload = {"op": op, "num_gpus": num_gpus, "nodes": box.num_nodes, "bytes": size,
               "cluster": box.name,
               "gpu": box.device.name, "algorithm": chosen, "time_s": time_s,
               "algbw_gbps": algbw, "busbw_gbps": algbw * bus_bandwidth_factor(op, num_gpus)}
    if json_out:
        emit_json(payload)
        return
    _print(payload, model.algorithm_times(*args))


def _print(payload: dict, times: dict[str, np.ndarray]) -> None:
    table = Table(title=f"{payload['op']} of {payload['bytes']:.4g} B over "
                        f"{payload['num_gpus']} x {payload['gpu']} ({payload['nodes']} "
                        f"node(s), {payload['cluster']})")
    for col in ("algorithm", "time", "algbw GB/s", "busbw GB/s"):
        table.add_column(col, justify="left" if col == "algorithm" else "right")
    factor = payload["busbw_gbps"] / payload["algbw_gbps"]
    for name in ("ring", "tree", "direct", "hierarchical"):
        t = float(times[name][0])
        if not np.isfinite(t):
            continue
        bw = payload["bytes"] / t / 1e9
        mark = " *" if name == payload["algorithm"] else ""
        table.add_row(name + mark, f"{t * 1e6:,.1f} us", f"{bw:,.1f}", f"{bw * factor:,.1f}")
    Console().print(table)
    Console().print(f"* time {payload['time_s'] * 1e6:,.1f} us with {payload['algorithm']}: "
                    f"algbw {payload['algbw_gbps']:,.1f} GB/s, busbw "
                    f"{payload['busbw_gbps']:,.1f} GB/s")
