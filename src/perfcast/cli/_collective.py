"""`perfcast collective`: one collective's time and bandwidths, by algorithm."""

from __future__ import annotations

import math
from typing import Annotated

import typer

from perfcast.api import CollectiveRequest, CollectiveResult
from perfcast.cli._common import (
    FormatOption,
    JsonOption,
    answer,
    guarded,
)
from perfcast.cli._console import Table, network_line, new_console
from perfcast.comm import ALGORITHMS, COLLECTIVES

__all__ = ["collective"]


@guarded
def collective(
    op: Annotated[str, typer.Option(help=f"{', '.join(COLLECTIVES)} (or torch's / "
                                    "nccl-tests' names).")],
    num_gpus: Annotated[int, typer.Option(help="GPUs in the group.")],
    bytes: Annotated[str, typer.Option(
        "--bytes", help="Message size (the whole buffer, nccl-tests' size): 1e6, 64MiB, 1GB.")],
    gpu: Annotated[str | None, typer.Option(help="Catalog GPU (its preset or a generic box)."
                                            )] = None,
    cluster: Annotated[str | None, typer.Option(help="Cluster preset (dgx-h100, ...).")] = None,
    nodes: Annotated[int | None, typer.Option(
        help="Nodes the group spans (default: as few as hold it).")] = None,
    algorithm: Annotated[str, typer.Option(help=f"{', '.join(ALGORITHMS)}.")] = "auto",
    sharp: Annotated[bool, typer.Option(
        help="The network reduces in its switches (InfiniBand SHARP, NCCL CollNet).")] = False,
    oversubscription: Annotated[float, typer.Option(
        help="Leaf-to-spine taper: a group over more than --nodes-per-leaf nodes gets the "
             "adapters' rate / this.")] = 1.0,
    nodes_per_leaf: Annotated[int | None, typer.Option(
        help="Nodes one leaf switch reaches (default: one non-blocking tier).")] = None,
    sendrecv_latency_us: Annotated[float | None, typer.Option(
        help="Measured 2-node send/recv (nccl-tests) latency, us.")] = None,
    sendrecv_gbps: Annotated[float | None, typer.Option(
        help="Its large-message rate, GB/s: each GPU's network stream.")] = None,
    gpus_per_nic: Annotated[int | None, typer.Option(
        help="GPUs sharing one network adapter (default: the preset's).")] = None,
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """Seconds, algorithm and bus bandwidth of one collective (NCCL conventions)."""
    answer(CollectiveRequest, locals(), _print)


def _print(result: CollectiveResult) -> None:
    p = result.payload()
    table = Table(title=f"{p['op']} of {p['bytes']:.4g} B over {p['num_gpus']} x {p['gpu']} "
                        f"({p['nodes']} node(s), {p['cluster']})")
    for col in ("algorithm", "time", "algbw GB/s", "busbw GB/s"):
        table.add_column(col, justify="left" if col == "algorithm" else "right")
    factor = p["busbw_gbps"] / p["algbw_gbps"]
    for name in ("ring", "tree", "direct", "hierarchical", "nvls", "collnet"):
        t = result.algorithm_times_s.get(name, math.inf)
        if not math.isfinite(t):
            continue
        bw = p["bytes"] / t / 1e9
        mark = " *" if name == p["algorithm"] else ""
        table.add_row(name + mark, f"{t * 1e6:,.1f} us", f"{bw:,.1f}", f"{bw * factor:,.1f}")
    console = new_console()
    console.print(table)
    if p["network"] is not None and p["nodes"] > 1:
        console.print(network_line(p["network"]))
    console.print(f"* time {p['time_s'] * 1e6:,.1f} us with {p['algorithm']}: "
                    f"algbw {p['algbw_gbps']:,.1f} GB/s, busbw {p['busbw_gbps']:,.1f} GB/s")
