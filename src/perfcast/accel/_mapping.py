"""A mapping: per storage level, temporal loop factors with their order, spatial factors, and
which tensors the level keeps (bypass). Timeloop's mapping, outermost level first."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, field_validator

from perfcast.accel._arch import TENSORS, ArchSpec
from perfcast.accel._problem import _ALIASES, DIMS, Problem
from perfcast.errors import InputError

__all__ = ["LevelMapping", "Mapping"]


def _canon(factors: dict[str, int]) -> dict[str, int]:
    out = {}
    for dim, value in factors.items():
        dim = _ALIASES.get(dim, dim)
        if dim not in DIMS:
            raise ValueError(f"unknown loop dimension {dim!r} (allowed: {', '.join(DIMS)})")
        if int(value) < 1:
            raise ValueError(f"factor {dim}={value} must be >= 1")
        if int(value) > 1:
            out[dim] = int(value)
    return out


class LevelMapping(BaseModel):
    """Loops of one level: `permutation` lists dims innermost first (Timeloop's convention);
    dims it omits go outside the listed ones, in DIMS order. `keeps` None: the arch's keeps."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    temporal: dict[str, int] = Field(default_factory=dict)
    permutation: str = ""
    spatial: dict[str, int] = Field(default_factory=dict)
    keeps: tuple[str, ...] | None = None

    @field_validator("temporal", "spatial")
    @classmethod
    def _factors(cls, value: dict[str, int]) -> dict[str, int]:
        return _canon(value)

    @field_validator("permutation")
    @classmethod
    def _perm(cls, value: str) -> str:
        value = "".join(_ALIASES.get(ch, ch) for ch in value)
        if set(value) - set(DIMS) or len(set(value)) != len(value):
            raise ValueError(f"permutation {value!r} must list distinct dims of {''.join(DIMS)}")
        return value

    def loops(self) -> list[tuple[str, int]]:
        """Temporal (dim, bound) pairs with bound > 1, innermost first."""
        order = list(self.permutation) + [d for d in DIMS if d not in self.permutation]
        return [(d, self.temporal[d]) for d in order if d in self.temporal]


class Mapping(BaseModel):
    """One LevelMapping per architecture level, outermost first."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    levels: tuple[LevelMapping, ...]

    def keeps(self, arch: ArchSpec, index: int) -> tuple[str, ...]:
        own = self.levels[index].keeps
        return arch.levels[index].keeps if own is None else own

    def check(self, arch: ArchSpec, problem: Problem) -> None:
        """Raise InputError unless the factors multiply to the problem and fit fan-outs."""
        if len(self.levels) != len(arch.levels):
            raise InputError("mapping.levels", f"{len(self.levels)} levels for an arch with "
                             f"{len(arch.levels)}", [lvl.name for lvl in arch.levels])
        for dim in DIMS:
            total = math.prod(lm.temporal.get(dim, 1) * lm.spatial.get(dim, 1)
                              for lm in self.levels)
            if total != problem.dims[dim]:
                raise InputError(f"mapping.{dim}", f"factors multiply to {total}, the problem "
                                 f"has {dim}={problem.dims[dim]}", str(problem.dims[dim]))
        for lm, lvl in zip(self.levels, arch.levels, strict=True):
            used = math.prod(lm.spatial.values())
            if used > lvl.fanout:
                raise InputError(f"mapping.{lvl.name}.spatial", f"uses {used} instances, the "
                                 f"level fans out to {lvl.fanout}", f"<= {lvl.fanout}")
            if lm.keeps is not None and set(lm.keeps) - set(TENSORS):
                raise InputError(f"mapping.{lvl.name}.keeps", f"unknown tensor in {lm.keeps}",
                                 TENSORS)
        if set(self.keeps(arch, 0)) != set(TENSORS):
            raise InputError("mapping.keeps", "the outermost level must keep every tensor")

    @classmethod
    def from_timeloop(cls, arch: ArchSpec, entries: list[dict]) -> Mapping:
        """From Timeloop-style entries: {target, type: temporal|spatial|bypass, factors
        ("R=3 P=16" or "R3 P16"), permutation, keep}."""
        per: dict[str, dict] = {lvl.name: {} for lvl in arch.levels}
        for entry in entries:
            target, kind = entry["target"], entry.get("type", "temporal")
            slot = per[arch.levels[arch.level_index(target)].name]
            if kind == "bypass":
                slot["keeps"] = tuple(entry.get("keep", ()))
                continue
            factors = {}
            for item in str(entry.get("factors", "")).split():
                dim, _, value = item.partition("=") if "=" in item else (item[0], "", item[1:])
                factors[dim] = int(value)
            slot["spatial" if kind == "spatial" else "temporal"] = factors
            if kind != "spatial":
                slot["permutation"] = entry.get("permutation", "")
        return cls(levels=tuple(LevelMapping(**per[lvl.name]) for lvl in arch.levels))
