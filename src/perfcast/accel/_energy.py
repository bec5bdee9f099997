"""Default energy tables (Accelergy's method: energy per action per component class) for
65 nm, 45 nm and 40 nm, and the rules that scale them to a level's size and word width.

An arch spec that names a `technology` takes every per-access energy and the MAC energy it
does not give itself from that table (`accel/data/energy_tables.json`, each table sourced)."""

from __future__ import annotations

import json
import math
from functools import cache
from importlib import resources

from perfcast.errors import InputError, close_matches

__all__ = ["MEMORIES", "access_energy_pj", "mac_energy_pj", "memory_class", "technology_names"]

MEMORIES: tuple[str, ...] = ("dram", "sram", "regfile")
_REGFILE_MAX_BYTES = 512  # perfcast's split: smaller on-chip stores are register files
# Horowitz ISSCC 2014, 45 nm: 8-bit mult 0.2 pJ of the 0.23 pJ MAC (add 0.03 pJ)
_MULT_SHARE = 0.2 / 0.23
_SQRT_SLOPE = 0.5  # Horowitz ISSCC 2014: 8 KB -> 32 KB (4x) doubles a 64-bit access


@cache
def _tables() -> dict[str, dict]:
    path = resources.files("perfcast.accel") / "data" / "energy_tables.json"
    return json.loads(path.read_text())["technologies"]


def technology_names() -> list[str]:
    """Technologies with a default energy table."""
    return sorted(_tables())


def _table(technology: str) -> dict:
    tables = _tables()
    if technology not in tables:
        hint = close_matches(technology, tables) or sorted(tables)
        raise InputError("technology", f"no default energy table for {technology!r}; did "
                         f"you mean {', '.join(hint)}?", sorted(tables))
    return tables[technology]


def mac_energy_pj(technology: str, word_bits: int = 8) -> float:
    """One integer MAC of `word_bits`-bit operands. Scaling (Horowitz ISSCC 2014, whose 8-
    and 32-bit int figures it reproduces within 7%): an array multiplier's energy grows with
    bits², an adder's with bits; the 8-bit table MAC is split 0.2 : 0.03 between them."""
    k = word_bits / 8
    return _table(technology)["mac_pj"] * (_MULT_SHARE * k * k + (1 - _MULT_SHARE) * k)


def memory_class(capacity_bytes: float | None) -> str:
    """dram when unbounded, regfile up to 512 bytes, else sram (perfcast's convention)."""
    if capacity_bytes is None:
        return "dram"
    return "regfile" if capacity_bytes <= _REGFILE_MAX_BYTES else "sram"


def _sram_pj(points: list[list[float]], capacity_bytes: float, column: int) -> float:
    """A 64-bit access at `capacity_bytes`: log-log interpolation between the table's
    (bytes, read, write) points, extrapolated along the nearest segment; one point: energy
    ∝ sqrt(capacity) (Horowitz ISSCC 2014's 8 KB -> 32 KB step)."""
    pts = sorted(points)
    if len(pts) == 1:
        size, energy = pts[0][0], pts[0][column]
        return energy * (capacity_bytes / size) ** _SQRT_SLOPE
    i = 0
    while i < len(pts) - 2 and capacity_bytes > pts[i + 1][0]:
        i += 1
    (s0, *e0), (s1, *e1) = pts[i], pts[i + 1]
    slope = math.log(e1[column - 1] / e0[column - 1]) / math.log(s1 / s0)
    return e0[column - 1] * (capacity_bytes / s0) ** slope


def access_energy_pj(technology: str, memory: str, capacity_bytes: float | None,
                     access_bits: int, action: str) -> float:
    """Energy of one physical access of `access_bits` bits ('read' or 'write'; an update is a
    write) to a `memory` store of `capacity_bytes`. Width scaling: energy ∝ bits moved (a
    64-bit figure is 8 bytes' worth; Horowitz ISSCC 2014 quotes memories per 64-bit word)."""
    if memory not in MEMORIES:
        raise InputError("memory", f"unknown memory class {memory!r}", MEMORIES)
    if action not in ("read", "write"):
        raise InputError("action", f"unknown action {action!r}", ("read", "write"))
    table = _table(technology)
    if memory == "dram":
        return table["dram_pj_per_64bit"][action] * access_bits / 64
    if memory == "regfile":
        return table["regfile_pj_per_byte"][action] * access_bits / 8
    if capacity_bytes is None:
        raise InputError("capacity_words", "an sram level needs a capacity", "> 0")
    column = 1 if action == "read" else 2
    return _sram_pj(table["sram_pj_per_64bit"], capacity_bytes, column) * access_bits / 64
