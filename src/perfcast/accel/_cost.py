"""Cost of one mapping: cycles, utilisation, energy per level and tensor, pJ/MAC, EDP."""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfcast.accel._arch import ArchSpec
from perfcast.accel._mapping import Mapping
from perfcast.accel._nest import ACTIONS, access_counts, tile_fits
from perfcast.accel._problem import Problem
from perfcast.errors import InputError

__all__ = ["AccelResult", "evaluate_mapping"]

_PJ = 1e-12


@dataclass(frozen=True)
class AccelResult:
    """One layer on one accelerator under one mapping. Energies in joules; `accesses` are
    scalar counts summed over a level's instances; `energy_breakdown` keys are
    "<level>.<tensor>", "<level>.leak" and "mac" (MAC switching plus MAC leakage)."""

    arch: str
    problem: str
    macs: int
    cycles: int
    compute_cycles: int
    utilization: float
    energy_j: float
    energy_breakdown: dict[str, float]
    accesses: dict[str, dict[str, dict[str, int]]]
    mapping: Mapping
    clock_hz: float
    bound_by: str = "compute"
    fits: bool = True

    @property
    def energy_per_mac_j(self) -> float:
        return self.energy_j / self.macs

    @property
    def seconds(self) -> float:
        return self.cycles / self.clock_hz

    @property
    def edp_j_s(self) -> float:
        """Energy-delay product, joule-seconds."""
        return self.energy_j * self.seconds

    def as_dict(self) -> dict:
        return {
            "arch": self.arch, "problem": self.problem, "macs": self.macs,
            "cycles": self.cycles, "compute_cycles": self.compute_cycles,
            "bound_by": self.bound_by, "utilization": self.utilization,
            "seconds": self.seconds, "energy_j": self.energy_j,
            "energy_per_mac_j": self.energy_per_mac_j, "edp_j_s": self.edp_j_s,
            "energy_breakdown": dict(self.energy_breakdown), "accesses": self.accesses,
            "mapping": self.mapping.model_dump(mode="json"),
        }


def _cycles(arch: ArchSpec, mapping: Mapping, counts: dict) -> tuple[int, int, str]:
    """max(compute cycles, each level's words per instance over its port bandwidths)."""
    compute = math.prod(v for lm in mapping.levels for v in lm.temporal.values())
    cycles, bound = compute, "compute"
    for i, lvl in enumerate(arch.levels):
        per_tensor = counts.get(lvl.name, {}).values()
        reads = sum(a["reads"] for a in per_tensor) / arch.instances(i)
        writes = sum(a["writes"] + a["updates"] for a in per_tensor) / arch.instances(i)
        need = math.ceil(lvl.cycles_for(reads, writes))
        if need > cycles:
            cycles, bound = need, lvl.name
    return compute, cycles, bound


def _energy_pj(arch: ArchSpec, problem: Problem, counts: dict, cycles: int) -> dict[str, float]:
    """Accelergy's rule: energy = Σ block accesses × energy per action, + leak × cycles."""
    out: dict[str, float] = {}
    for i, lvl in enumerate(arch.levels):
        for tensor, actions in counts.get(lvl.name, {}).items():
            # a block (vector) access moves block_words words: Timeloop's per-scalar
            # energy is the block energy amortised over the words it carries
            out[f"{lvl.name}.{tensor}"] = sum(
                math.ceil(actions[a] / lvl.block_words) * lvl.energy_pj(a) for a in ACTIONS)
        if lvl.leak_pj_per_cycle:
            out[f"{lvl.name}.leak"] = lvl.leak_pj_per_cycle * arch.instances(i) * cycles
    out["mac"] = problem.macs * arch.mac_energy_pj + arch.mac_leak_pj_per_cycle * \
        arch.num_pes * cycles
    return out


def evaluate_mapping(arch: ArchSpec, problem: Problem, mapping: Mapping,
                     check: bool = True) -> AccelResult:
    """Cost a fixed mapping (the Timeloop model step). `check`: validate factors first."""
    if check:
        mapping.check(arch, problem)
    fits = tile_fits(arch, problem, mapping)
    if check and not fits:
        raise InputError("mapping", "a tile does not fit its level's capacity")
    counts = access_counts(arch, problem, mapping)
    compute, cycles, bound = _cycles(arch, mapping, counts)
    energy = {k: v * _PJ for k, v in _energy_pj(arch, problem, counts, cycles).items()}
    return AccelResult(
        arch=arch.name, problem=problem.name, macs=problem.macs, cycles=cycles,
        compute_cycles=compute, utilization=problem.macs / (cycles * arch.num_pes),
        energy_j=sum(energy.values()), energy_breakdown=energy, accesses=counts,
        mapping=mapping, clock_hz=arch.clock_hz, bound_by=bound, fits=fits)
