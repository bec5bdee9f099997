"""`perfcast accel`: map a model's layers onto a custom accelerator (Timeloop/Accelergy method)
and print cycles, utilisation, energy per MAC and the energy breakdown per level."""

from __future__ import annotations

from typing import Annotated

import typer

from perfcast.api import AccelModelResult, AccelRequest
from perfcast.cli._common import (
    FormatOption,
    JsonOption,
    answer,
    guarded,
)
from perfcast.cli._console import Table, new_console

__all__ = ["accel"]


def _print(result: AccelModelResult) -> None:
    totals, model = result.totals, result.request.workload.model
    levels = list(result.energy_by_level())
    t = Table(title=f"{model} on {result.arch.name}: {totals['cycles']:,} cycles, "
              f"utilisation {totals['utilization']:.1%}, "
              f"{totals['energy_per_mac_j'] * 1e12:.2f} pJ/MAC, {totals['energy_j'] * 1e3:.3f} mJ")
    for col in ("layer", "MACs", "cycles", "util", "pJ/MAC", "bound by", *levels):
        t.add_column(col, justify="left" if col == "layer" else "right")
    for r in result.layers:
        shares = result.energy_by_level(r)
        t.add_row(r.problem, f"{r.macs:,}", f"{r.cycles:,}", f"{r.utilization:.0%}",
                  f"{r.energy_per_mac_j * 1e12:.2f}", r.bound_by,
                  *(f"{shares.get(lvl, 0.0) / r.energy_j:.0%}" for lvl in levels))
    new_console().print(t)


@guarded
def accel(
    arch: Annotated[str, typer.Option(help="architecture preset or YAML file")] = "eyeriss-like",
    model: Annotated[str, typer.Option(help="resnet50, vgg16, mobilenet, bert-base")] =
        "resnet50",
    layer: Annotated[str | None, typer.Option(help="map only this layer (e.g. conv1)")] = None,
    objective: Annotated[str, typer.Option(help="energy, delay or edp")] = "edp",
    dataflow: Annotated[str, typer.Option(help="weight-, output-, input-, row-stationary")] =
        "row-stationary",
    batch_size: Annotated[int, typer.Option("--batch-size", help="images per batch")] = 1,
    seed: Annotated[int, typer.Option(help="mapper seed")] = 0,
    free_bypass: Annotated[bool, typer.Option(help="let the mapper choose bypass per level")] =
        False,
    plot: Annotated[str | None, typer.Option(help="write a stacked energy-breakdown PNG")] =
        None,
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """Map a model's layers onto an accelerator: cycles, utilisation, energy breakdown."""
    answer(AccelRequest, locals(), _print)
