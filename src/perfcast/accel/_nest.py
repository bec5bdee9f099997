"""Reuse analysis: scalar reads, writes (fills) and updates per level and tensor.

Timeloop's counting rules, for each tensor along the chain of levels that keep it:
- a child level reloads its tile each time the loops above it move the tile. Loops above the
  child that do not index the tensor and sit inside the first loop that does give full reuse;
  the first relevant loop slides the tile (only the new part is fetched when consecutive
  tiles overlap, e.g. a convolution window moving along P); every loop outside it repeats the
  sweep. Parent reads = child fills, once per distinct tile (multicast over spatial copies
  that share data);
- the innermost keeper serves one operand read per MAC (per distinct spatial copy);
- outputs: every child write-back is an update at the parent; the first update of each output
  element needs no read (read-modify-write rule), so parent reads = updates - distinct outputs
  (times the spatial copies that each start a partial sum). Draining a child's outputs to its
  parent costs the child no extra read (exercise 01's 7500.08 fJ/MAC leaves room for 197
  register-file accesses, not 213).
"""

from __future__ import annotations

import math

from perfcast.accel._arch import TENSORS, ArchSpec
from perfcast.accel._mapping import Mapping
from perfcast.accel._problem import Problem, axis_extent, tile_words

__all__ = ["ACTIONS", "access_counts", "level_tile", "tile_fits"]

ACTIONS: tuple[str, ...] = ("reads", "writes", "updates")
Counts = dict[str, dict[str, dict[str, int]]]


def level_tile(mapping: Mapping, index: int) -> dict[str, int]:
    """Loop bounds of the data one instance of level `index` holds (its loops and below)."""
    tile = {d: 1 for d in ("N", "C", "M", "R", "S", "P", "Q")}
    for lm in mapping.levels[index:]:
        for part in (lm.temporal, lm.spatial):
            for dim, value in part.items():
                tile[dim] *= value
    return tile


def tile_fits(arch: ArchSpec, problem: Problem, mapping: Mapping) -> bool:
    """Every level's kept tiles fit its capacity."""
    for i, lvl in enumerate(arch.levels):
        if lvl.capacity_words is None:
            continue
        tile = level_tile(mapping, i)
        need = sum(tile_words(problem, t, tile) for t in mapping.keeps(arch, i))
        if need > lvl.capacity_words:
            return False
    return True


def _loops_above(mapping: Mapping, child: int) -> list[tuple[str, int]]:
    """Temporal loops above level `child`, innermost first; adjacent same-dim loops merged."""
    loops: list[tuple[str, int]] = []
    for i in range(child - 1, -1, -1):
        for dim, bound in mapping.levels[i].loops():
            if loops and loops[-1][0] == dim:
                loops[-1] = (dim, loops[-1][1] * bound)
            else:
                loops.append((dim, bound))
    return loops


def _loads(problem: Problem, tensor: str, mapping: Mapping, child: int) -> int:
    """Words one instance of level `child` fetches of `tensor` over the whole run."""
    tile = level_tile(mapping, child)
    words = tile_words(problem, tensor, tile)
    axes = problem.axes(tensor)
    loops = _loops_above(mapping, child)
    for k, (dim, bound) in enumerate(loops):
        axis = next((a for a in axes if any(d == dim for d, _ in a)), None)
        if axis is None:
            continue  # irrelevant loop inside every relevant one: the tile stays
        extent = axis_extent(axis, tile)
        step = tile[dim] * dict(axis)[dim]
        delta = words // extent * min(step, extent)
        sweeps = math.prod(b for _, b in loops[k + 1:])
        return sweeps * (words + (bound - 1) * delta)
    return words


def _spatial(mapping: Mapping, levels: range, problem: Problem, tensor: str | None,
             relevant: bool) -> int:
    """Product of spatial factors at `levels` over dims relevant (or not) to `tensor`."""
    dims = {d for a in problem.axes(tensor) for d, _ in a} if tensor else set()
    out = 1
    for i in levels:
        for dim, value in mapping.levels[i].spatial.items():
            if tensor is None or (dim in dims) == relevant:
                out *= value
    return out


def access_counts(arch: ArchSpec, problem: Problem, mapping: Mapping) -> Counts:
    """level -> tensor -> {reads, writes, updates}: scalar accesses summed over instances."""
    n = len(arch.levels)
    counts: Counts = {}
    macs, outputs = problem.macs, problem.size_words("Outputs")
    for tensor in TENSORS:
        keepers = [i for i in range(n) if tensor in mapping.keeps(arch, i)]
        for i in keepers:
            counts.setdefault(arch.levels[i].name, {})[tensor] = dict.fromkeys(ACTIONS, 0)
        for p, c in zip(keepers, [*keepers[1:], n], strict=True):
            at_p = counts[arch.levels[p].name][tensor]
            copies = _spatial(mapping, range(c), problem, tensor, relevant=False)
            if c == n:  # the MACs: one operand access each
                if tensor == "Outputs":
                    at_p["updates"] += macs
                    at_p["reads"] += macs - outputs * copies
                else:
                    shared = _spatial(mapping, range(p, n), problem, tensor, relevant=False)
                    at_p["reads"] += macs // shared
                continue
            at_c = counts[arch.levels[c].name][tensor]
            loads = _loads(problem, tensor, mapping, c)
            inst = _spatial(mapping, range(c), problem, None, relevant=True)
            if tensor == "Outputs":
                fills = loads * inst - outputs * copies
                at_p["updates"] += loads * inst
                at_p["reads"] += fills
                at_c["writes"] += fills
            else:
                shared = _spatial(mapping, range(p, c), problem, tensor, relevant=False)
                at_p["reads"] += loads * inst // shared
                at_c["writes"] += loads * inst
    return counts
