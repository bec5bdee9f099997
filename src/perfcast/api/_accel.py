"""`accel`: a model's layers mapped onto a custom accelerator (the Timeloop/Accelergy method):
cycles, utilisation, energy per MAC and the energy breakdown per level."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field

from perfcast import __version__
from perfcast.accel import (
    AccelResult,
    ArchSpec,
    Problem,
    get_arch,
    map_layers,
    model_problems,
    model_totals,
)
from perfcast.api._base import Group, Request, register
from perfcast.api._units import MAX_BATCH
from perfcast.errors import check_output_file, writing

__all__ = ["AccelMapper", "AccelModelResult", "AccelOutputs", "AccelRequest", "AccelWorkload",
           "ResolvedAccel", "level_shares"]


class AccelWorkload(Group):
    """Which network (or one of its layers) runs, at what batch."""

    model: str = Field("resnet50", description="resnet50, vgg16, mobilenet, bert-base (or an "
                       "ONNX file).")
    layer: str | None = Field(None, description="Map only this layer (e.g. conv1).")
    batch_size: int = Field(1, ge=1, le=MAX_BATCH, description="Images per batch.")


class AccelMapper(Group):
    """How the mapper searches each layer's mapping."""

    objective: str = Field("edp", description="energy, delay or edp.")
    dataflow: str = Field("row-stationary", description="weight-, output-, input-, "
                          "row-stationary.")
    seed: int = Field(0, ge=0, description="Mapper seed.")
    free_bypass: bool = Field(False, description="Let the mapper choose bypass per level.")


class AccelOutputs(Group):
    """Files the command writes beside its answer (never over an existing file)."""

    plot: str | None = Field(None, description="Write a stacked energy-breakdown PNG.")


class AccelRequest(Request):
    """Cycles, utilisation and energy of a network's layers on an accelerator."""

    command = "accel"
    arch: str = Field("eyeriss-like", description="Architecture preset or YAML file.")
    workload: AccelWorkload = AccelWorkload()
    mapper: AccelMapper = AccelMapper()
    outputs: AccelOutputs = AccelOutputs()


@dataclass(frozen=True)
class ResolvedAccel:
    request: AccelRequest
    arch: ArchSpec
    problems: list[Problem]


def resolve_accel(request: AccelRequest) -> ResolvedAccel:
    spec = get_arch(request.arch)
    w = request.workload
    problems = model_problems(w.model, w.batch_size, w.layer)
    plot = request.outputs.plot
    check_output_file(plot or None, "plot")
    return ResolvedAccel(request, spec, problems)


def level_shares(breakdown: dict[str, float]) -> dict[str, float]:
    """Joules per level ("<level>.<tensor>" and "<level>.leak" summed; "mac" kept)."""
    out: dict[str, float] = {}
    for key, joules in breakdown.items():
        level = key.split(".", 1)[0]
        out[level] = out.get(level, 0.0) + joules
    return out


@dataclass(frozen=True)
class AccelModelResult:
    """Each layer's searched mapping and costs, and the whole model's totals."""

    request: AccelRequest
    arch: ArchSpec
    layers: list[AccelResult]
    totals: dict[str, Any]

    def energy_by_level(self, layer: AccelResult | None = None) -> dict[str, float]:
        """Joules per level of the whole model (each layer times its count), or of one layer."""
        return level_shares(self.totals["energy_breakdown"] if layer is None
                            else layer.energy_breakdown)

    def payload(self) -> dict[str, Any]:
        m = self.request.mapper
        return {"perfcast_version": __version__, "arch": self.arch.name,
                "model": self.request.workload.model, "objective": m.objective,
                "dataflow": m.dataflow, "seed": m.seed, "free_bypass": m.free_bypass,
                **self.totals, "energy_by_level": self.energy_by_level(),
                "mapping": {r.problem: r.mapping.model_dump(mode="json") for r in self.layers},
                "per_layer": [_layer_row(r) for r in self.layers]}


def _layer_row(result: AccelResult) -> dict:
    return {"layer": result.problem, **{k: v for k, v in result.as_dict().items()
                                       if k not in ("problem", "arch")}}


def _plot(path: str, results: list[AccelResult]) -> None:
    """A stacked bar per layer: energy (µJ) per level. Only when `plot` asks for it."""
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
    try:
        with writing(path, "plot"):
            fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)


def execute_accel(r: ResolvedAccel) -> AccelModelResult:
    m = r.request.mapper
    results = map_layers(r.arch, r.problems, objective=m.objective, dataflow=m.dataflow,
                         seed=m.seed, bypass=m.free_bypass)
    totals = model_totals(r.problems, results)
    if r.request.outputs.plot:
        _plot(r.request.outputs.plot, results)
    return AccelModelResult(r.request, r.arch, results, totals)


register(AccelRequest, resolve_accel, execute_accel)
