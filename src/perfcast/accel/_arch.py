"""Accelerator architecture specs: a storage hierarchy over a PE array, with an energy table.

Levels are listed outermost (DRAM) first. Each level keeps some tensors (the rest bypass it),
holds `capacity_words` words per instance, moves `block_words` words per physical access (a
vector access: energy is charged per block, as Timeloop charges a 64-bit SRAM access shared by
8 one-byte words) and fans out to `fanout_x` x `fanout_y` child instances (the PE array).
Per-access energies follow Accelergy's action table: read, write (fill) and update (a partial
sum written back), plus leakage per cycle."""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from perfcast.errors import InputError, close_matches, from_validation_error

__all__ = ["TENSORS", "ArchSpec", "Level", "arch_names", "get_arch", "load_arch_yaml"]

TENSORS: tuple[str, ...] = ("Weights", "Inputs", "Outputs")
_DATA = resources.files("perfcast.accel") / "data"


class Level(BaseModel):
    """One storage level (per instance) and the fan-out to the level below it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    capacity_words: int | None = Field(None, gt=0)  # None: unbounded (DRAM)
    block_words: int = Field(1, gt=0)
    keeps: tuple[str, ...] = TENSORS
    read_energy_pj: float = Field(ge=0)
    write_energy_pj: float = Field(ge=0)
    update_energy_pj: float | None = Field(None, ge=0)  # None: same as a write
    leak_pj_per_cycle: float = Field(0.0, ge=0)
    bandwidth_words_per_cycle: float | None = Field(None, gt=0)  # shared; None: unlimited
    read_bandwidth_words_per_cycle: float | None = Field(None, gt=0)  # read port
    write_bandwidth_words_per_cycle: float | None = Field(None, gt=0)  # fills and updates
    fanout_x: int = Field(1, gt=0)
    fanout_y: int = Field(1, gt=0)

    @model_validator(mode="after")
    def _known_tensors(self) -> Level:
        for tensor in self.keeps:
            if tensor not in TENSORS:
                raise ValueError(f"{self.name}: unknown tensor {tensor!r} in keeps "
                                 f"(allowed: {', '.join(TENSORS)})")
        return self

    def cycles_for(self, reads: float, writes: float) -> float:
        """Cycles one instance needs to move `reads` and `writes` (+updates) words: the
        slowest of its shared, read and write ports (0 when all are unlimited)."""
        need = 0.0
        for words, bw in ((reads + writes, self.bandwidth_words_per_cycle),
                          (reads, self.read_bandwidth_words_per_cycle),
                          (writes, self.write_bandwidth_words_per_cycle)):
            if bw is not None:
                need = max(need, words / bw)
        return need

    @property
    def fanout(self) -> int:
        return self.fanout_x * self.fanout_y

    def energy_pj(self, action: str) -> float:
        """Energy of one physical (block) access for 'reads', 'writes' or 'updates'."""
        if action == "reads":
            return self.read_energy_pj
        if action == "updates" and self.update_energy_pj is not None:
            return self.update_energy_pj
        return self.write_energy_pj


class ArchSpec(BaseModel):
    """A whole accelerator: levels outermost first, MAC energy, clock."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    technology: str = ""
    clock_hz: float = Field(gt=0)
    word_bits: int = Field(8, gt=0)
    mac_energy_pj: float = Field(ge=0)
    mac_leak_pj_per_cycle: float = Field(0.0, ge=0)
    levels: tuple[Level, ...] = Field(min_length=1)
    source: str = ""

    @model_validator(mode="after")
    def _outermost_keeps_all(self) -> ArchSpec:
        if set(self.levels[0].keeps) != set(TENSORS):
            raise ValueError(f"levels.0 ({self.levels[0].name}) must keep every tensor")
        names = [lvl.name for lvl in self.levels]
        if len(set(names)) != len(names):
            raise ValueError(f"level names must be unique, got {names}")
        return self

    @property
    def num_pes(self) -> int:
        """MAC units: the product of every level's fan-out."""
        return math.prod(lvl.fanout for lvl in self.levels)

    def instances(self, index: int) -> int:
        """How many copies of level `index` exist (fan-outs of the levels above it)."""
        return math.prod(lvl.fanout for lvl in self.levels[:index])

    def level_index(self, name: str) -> int:
        names = [lvl.name for lvl in self.levels]
        if name not in names:
            raise InputError("level", f"unknown level {name!r}; did you mean "
                             f"{', '.join(close_matches(name, names) or names)}?", names)
        return names.index(name)


def _from_dict(data: object, origin: str) -> ArchSpec:
    if not isinstance(data, dict):
        raise InputError("arch", f"{origin}: expected a mapping at the top level")
    try:
        return ArchSpec.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc, prefix="arch.", default="arch", origin=origin) from None


def load_arch_yaml(path: str | Path) -> ArchSpec:
    """Read and validate an architecture YAML file (safe_load only)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("arch", f"no such file {str(path)!r}")
    return _from_dict(yaml.safe_load(path.read_text()), str(path))


def arch_names() -> list[str]:
    """Names of the shipped architecture presets."""
    return sorted(p.name.removesuffix(".yaml") for p in _DATA.iterdir()
                  if p.name.endswith(".yaml"))


def get_arch(name: str) -> ArchSpec:
    """A shipped preset by name, or an architecture YAML file by path."""
    if name.endswith((".yaml", ".yml")) and Path(name).is_file():
        return load_arch_yaml(name)
    names = arch_names()
    if name not in names:
        hint = close_matches(name, names) or names
        raise InputError("arch", f"unknown architecture {name!r}; did you mean "
                         f"{', '.join(hint)}?", names)
    text = (_DATA / f"{name}.yaml").read_text()
    return _from_dict(yaml.safe_load(text), name)
