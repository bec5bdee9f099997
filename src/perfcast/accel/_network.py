"""Map every layer of a model: identical layer shapes are searched once (cached per call)."""

from __future__ import annotations

from dataclasses import replace

from perfcast.accel._arch import ArchSpec
from perfcast.accel._cost import AccelResult
from perfcast.accel._mapper import search_mapping
from perfcast.accel._problem import Problem

__all__ = ["map_layers", "model_totals"]


def _signature(p: Problem) -> tuple:
    return (tuple(p.dims.items()), p.stride_h, p.stride_w, p.dilation_h, p.dilation_w,
            p.depthwise)


def map_layers(arch: ArchSpec, problems: list[Problem], objective: str = "edp",
               dataflow: str = "row-stationary", seed: int = 0,
               bypass: bool = False) -> list[AccelResult]:
    """One searched AccelResult per layer, in order (each layer's own name); `bypass`: let
    the mapper choose which tensors each inner level keeps."""
    cache: dict[tuple, AccelResult] = {}
    out = []
    for p in problems:
        key = _signature(p)
        if key not in cache:
            cache[key] = search_mapping(arch, p, objective=objective, dataflow=dataflow,
                                        seed=seed, bypass=bypass)
        out.append(replace(cache[key], problem=p.name))
    return out


def model_totals(problems: list[Problem], results: list[AccelResult]) -> dict:
    """Whole-model sums (each layer times its `count`): cycles, energy, breakdown, pJ/MAC."""
    macs = sum(p.count * r.macs for p, r in zip(problems, results, strict=True))
    cycles = sum(p.count * r.cycles for p, r in zip(problems, results, strict=True))
    energy = sum(p.count * r.energy_j for p, r in zip(problems, results, strict=True))
    breakdown: dict[str, float] = {}
    for p, r in zip(problems, results, strict=True):
        for key, joules in r.energy_breakdown.items():
            breakdown[key] = breakdown.get(key, 0.0) + p.count * joules
    ideal = sum(p.count * r.macs / r.utilization for p, r in zip(problems, results, strict=True))
    seconds = cycles / results[0].clock_hz if results else 0.0
    return {"layers": len(problems), "macs": macs, "cycles": cycles, "seconds": seconds,
            "utilization": macs / ideal if ideal else 0.0, "energy_j": energy,
            "energy_per_mac_j": energy / macs if macs else 0.0, "edp_j_s": energy * seconds,
            "energy_breakdown": breakdown}
