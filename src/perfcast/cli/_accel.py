"""`perfcast accel`: map a model's layers onto a custom accelerator (Timeloop/Accelergy method)
and print cycles, utilisation, energy per MAC and the energy breakdown per level."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from perfcast import __version__
from perfcast.accel import (
    AccelResult,
    get_arch,
    map_layers,
    model_problems,
    model_totals,
)
from perfcast.cli._common import emit_json, guarded

__all__ = ["accel", "level_shares"]


def level_shares(breakdown: dict[str, float]) -> dict[str, float]:
    """Joules per level ("<level>.<tensor>" and "<level>.leak" summed; "mac" kept)."""
    out: dict[str, float] = {}
    for key, joules in breakdown.items():
        level = key.split(".", 1)[0]
        out[level] = out.get(level, 0.0) + joules
    return out


def _layer_row(result: AccelResult) -> dict:
    return {"layer": result.problem, **{k: v for k, v in result.as_dict().items()
                                       if k not in ("problem", "arch")}}


def _table(arch_name: str, model: str, results: list[AccelResult], totals: dict) -> Table:
    levels = list(level_shares(totals["energy_breakdown"]))
    t = Table(title=f"{model} on {arch_name}: {totals['cycles']:,} cycles, "
              f"utilisation {totals['utilization']:.1%}, "
              f"{totals['energy_per_mac_j'] * 1e12:.2f} pJ/MAC, {totals['energy_j'] * 1e3:.3f} mJ")
    for col in ("layer", "MACs", "cycles", "util", "pJ/MAC", "bound by", *levels):
        t.add_column(col, justify="left" if col == "layer" else "right")
    for r in results:
        shares = level_shares(r.energy_breakdown)
        t.add_row(r.problem, f"{r.macs:,}", f"{r.cycles:,}", f"{r.utilization:.0%}",
                  f"{r.energy_per_mac_j * 1e12:.2f}", r.bound_by,
                  *(f"{shares.get(lvl, 0.0) / r.energy_j:.0%}" for lvl in levels))
    return t


def _plot(path: str, results: list[AccelResult]) -> None:
    """A stacked bar per layer: energy (µJ) per level. Only when --plot asks for it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shares = [level_shares(r.energy_breakdown) for r in results]
    levels = list(dict.fromkeys(k for s in shares for k in s))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.25 * len(results)), 4.0))
    bottom = [0.0] * len(results)
    for lvl in levels:
        heights = [s.get(lvl, 0.0) * 1e6 for s in shares]
        ax.bar(range(len(results)), heights, bottom=bottom, label=lvl)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax.set_xticks(range(len(results)), [r.problem for r in results], rotation=90, fontsize=6)
    ax.set_ylabel("energy (µJ)")
    ax.set_title(f"energy breakdown per layer on {results[0].arch}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


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
    json_out: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Map a model's layers onto an accelerator: cycles, utilisation, energy breakdown."""
    spec = get_arch(arch)
    problems = model_problems(model, batch_size, layer)
    results = map_layers(spec, problems, objective=objective, dataflow=dataflow, seed=seed,
                         bypass=free_bypass)
    totals = model_totals(problems, results)
    if plot:
        _plot(plot, results)
    if json_out:
        emit_json({"perfcast_version": __version__, "arch": spec.name, "model": model,
                   "objective": objective, "dataflow": dataflow, "seed": seed,
                   "free_bypass": free_bypass, **totals,
                   "energy_by_level": level_shares(totals["energy_breakdown"]),
                   "mapping": {r.problem: r.mapping.model_dump(mode="json") for r in results},
                   "per_layer": [_layer_row(r) for r in results]})
        return
    Console().print(_table(spec.name, model, results, totals))
