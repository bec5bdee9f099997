"""`perfcast collective`: one collective's time and bandwidths, by algorithm."""

from __future__ import annotations

import math
from typing import Annotated

import typer

from perfcast.api import CollectiveRequest, CollectiveResult
from perfcast.cli._common import (
    FormatOption,
    GpusPerNicOption,
    JsonOption,
    NodesPerLeafOption,
    OversubscriptionOption,
    SendrecvGbpsOption,
    SendrecvLatencyOption,
    SharpOption,
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
    sharp: SharpOption = False,
    oversubscription: OversubscriptionOption = 1.0,
    nodes_per_leaf: NodesPerLeafOption = None,
    sendrecv_latency_us: SendrecvLatencyOption = None,
    sendrecv_gbps: SendrecvGbpsOption = None,
    gpus_per_nic: GpusPerNicOption = None,
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
