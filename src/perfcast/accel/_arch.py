"""Accelerator architecture specs: a storage hierarchy over a PE array, with an energy table.

Levels are listed outermost (DRAM) first. Each level keeps some tensors (the rest bypass it),
holds `capacity_words` words per instance, moves `block_words` words per physical access (a
vector access: energy is charged per block, as Timeloop charges a 64-bit SRAM access shared by
8 one-byte words) and fans out to `fanout_x` x `fanout_y` child instances (the PE array).
Per-access energies follow Accelergy's action table: read, write (fill) and update (a partial
sum written back), plus leakage per cycle. An arch naming a `technology` with a default table
(65nm, 45nm, 40nm: accel/_energy.py) takes every energy it does not give from that table."""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from perfcast.accel._energy import (
    MEMORIES,
    access_energy_pj,
    mac_energy_pj,
    memory_class,
    technology_names,
)
from perfcast.errors import InputError, close_matches, from_validation_error, read_user_yaml

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
    memory: str | None = None  # dram, sram or regfile; None: from capacity (memory_class)
    read_energy_pj: float = Field(ge=0)  # per block access; default: the technology's table
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
        if self.memory is not None and self.memory not in MEMORIES:
            raise ValueError(f"{self.name}: unknown memory {self.memory!r} "
                             f"(allowed: {', '.join(MEMORIES)})")
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
    mac_energy_pj: float = Field(ge=0)  # default: the technology's table
    mac_leak_pj_per_cycle: float = Field(0.0, ge=0)
    levels: tuple[Level, ...] = Field(min_length=1)
    source: str = ""

    @model_validator(mode="before")
    @classmethod
    def _table_defaults(cls, data: object) -> object:
        """Fill the MAC and per-access energies the spec leaves out from its technology's
        default table, scaled to each level's capacity and access width."""
        if not isinstance(data, dict):
            return data
        tech, bits, levels = (data.get("technology", ""), data.get("word_bits", 8),
                              data.get("levels") or [])
        if (not isinstance(tech, str) or not isinstance(levels, list) or isinstance(bits, bool)
                or not isinstance(bits, int) or bits < 1):
            return data  # the field validators name the bad value
        levels = [lvl.model_dump() if isinstance(lvl, Level) else lvl for lvl in levels]
        missing = data.get("mac_energy_pj") is None or any(
            isinstance(lvl, dict) and (lvl.get("read_energy_pj") is None
                                       or lvl.get("write_energy_pj") is None) for lvl in levels)
        if not missing:
            return data
        if tech not in technology_names():
            raise ValueError(f"technology {tech!r} has no default energy table: give every "
                             f"energy or name one (allowed: {', '.join(technology_names())})")
        out = {**data, "levels": [_level_defaults(lvl, tech, bits) if isinstance(lvl, dict)
                                  else lvl for lvl in levels]}
        if out.get("mac_energy_pj") is None:
            out["mac_energy_pj"] = mac_energy_pj(tech, bits)
        return out

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


def _level_defaults(level: dict, tech: str, word_bits: int) -> dict:
    """One level's read/write energies per block access from the technology's table."""
    words, block = level.get("capacity_words"), level.get("block_words", 1)
    if (isinstance(words, bool) or isinstance(block, bool)
            or not isinstance(words, int | float | None) or not isinstance(block, int | float)
            or (words is not None and words <= 0) or block < 1):
        return level  # the Level validator names the bad value
    size = None if words is None else words * word_bits / 8
    memory = level.get("memory") or memory_class(size)
    if memory not in MEMORIES:
        raise ValueError(f"{level.get('name')}: unknown memory {memory!r} "
                         f"(allowed: {', '.join(MEMORIES)})")
    bits = int(block) * word_bits
    out = dict(level)
    for action in ("read", "write"):
        if out.get(f"{action}_energy_pj") is None:
            out[f"{action}_energy_pj"] = access_energy_pj(tech, memory, size, bits, action)
    return out


def _from_dict(data: object, origin: str) -> ArchSpec:
    if not isinstance(data, dict):
        raise InputError("arch", f"{origin}: expected a mapping at the top level")
    try:
        return ArchSpec.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc, prefix="arch.", default="arch", origin=origin) from None


def load_arch_yaml(path: str | Path) -> ArchSpec:
    """Read and validate an architecture YAML file (safe_load only)."""
    data = read_user_yaml(path, "arch", "an architecture YAML file (see the shipped presets)")
    return _from_dict(data, str(path))


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
