"""Deterministic local search that finishes the mapper's random sampling: from a mapping, try
every single move (one prime factor of a loop to another level, one loop to the innermost or
outermost place of its level, one factor between the PE array and a temporal loop, one bypass
flip) and take the first that lowers the objective, until none does or the budget is spent.

Random sampling alone leaves seed-dependent local choices (e.g. the DRAM loop order that
re-reads a tensor several times although one order reads it once); one-move descent from its
best point removes most of that spread at a small, bounded cost."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from perfcast.accel._arch import TENSORS, ArchSpec
from perfcast.accel._cost import AccelResult, evaluate_mapping
from perfcast.accel._mapping import LevelMapping, Mapping
from perfcast.accel._nest import tile_fits
from perfcast.accel._problem import Problem

__all__ = ["build", "fanout_level", "primes", "refine"]

Factors = list[dict[str, int]]
State = tuple[Factors, Factors, list[str], list]


def primes(n: int) -> list[int]:
    """Prime factors of n, smallest first, with repeats."""
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return [*out, n] if n > 1 else out


def fanout_level(arch: ArchSpec) -> int | None:
    """The first level that fans out to several children (the PE array), if any."""
    return next((i for i, lvl in enumerate(arch.levels) if lvl.fanout > 1), None)


def build(arch: ArchSpec, temporal: Factors, spatial: Factors, perms: list[str],
          keeps: list | None = None) -> Mapping:
    """A Mapping from per-level factor dicts (unvalidated: the mapper checks fits itself)."""
    keeps = keeps or [None] * len(arch.levels)
    levels = tuple(LevelMapping.model_construct(
        temporal={d: v for d, v in t.items() if v > 1}, permutation=p,
        spatial={d: v for d, v in s.items() if v > 1}, keeps=k)
        for t, s, p, k in zip(temporal, spatial, perms, keeps, strict=True))
    return Mapping.model_construct(levels=levels)


def _state(mapping: Mapping) -> State:
    lv = mapping.levels
    return ([dict(m.temporal) for m in lv], [dict(m.spatial) for m in lv],
            [m.permutation for m in lv], [m.keeps for m in lv])


def _moved(factors: Factors, src: int, dst_factors: Factors, dst: int, dim: str,
           p: int) -> None:
    factors[src][dim] //= p
    if factors[src][dim] == 1:
        del factors[src][dim]
    dst_factors[dst][dim] = dst_factors[dst].get(dim, 1) * p


def _factor_moves(state: State, n: int) -> Iterator[State]:
    """One distinct prime of one temporal loop to each other level, where it keeps its place
    in that level's order, or, when the dim is new there, also as the innermost loop."""
    temporal, spatial, perms, keeps = state
    for i, level in enumerate(temporal):
        for dim in sorted(level):
            for p in sorted(set(primes(level[dim]))):
                for j in range(n):
                    if j != i:
                        t = [dict(x) for x in temporal]
                        _moved(t, i, t, j, dim, p)
                        yield t, spatial, perms, keeps
                        if dim not in temporal[j]:
                            inner = list(perms)
                            inner[j] = dim + perms[j].replace(dim, "")
                            yield t, spatial, inner, keeps


def _swap_moves(state: State) -> Iterator[State]:
    """One prime of a loop at level i to level j and one of another dim from j to i: what
    frees room in a small buffer for a loop that reuses its tensor better."""
    temporal, spatial, perms, keeps = state
    for i, a in enumerate(temporal):
        for j in range(i + 1, len(temporal)):
            for d1 in sorted(a):
                for d2 in sorted(d for d in temporal[j] if d != d1):
                    t = [dict(x) for x in temporal]
                    _moved(t, i, t, j, d1, primes(a[d1])[0])
                    _moved(t, j, t, i, d2, primes(temporal[j][d2])[0])
                    yield t, spatial, perms, keeps


def _order_moves(state: State) -> Iterator[State]:
    """One present loop of a level to the innermost or the outermost place."""
    temporal, spatial, perms, keeps = state
    for i, level in enumerate(temporal):
        present = [d for d in perms[i] if d in level] + sorted(d for d in level
                                                               if d not in perms[i])
        if len(present) < 2:
            continue
        for dim in present:
            rest = [d for d in present if d != dim]
            for order in ([dim, *rest], [*rest, dim]):
                if order != present:
                    p = list(perms)
                    p[i] = "".join(order) + "".join(d for d in perms[i] if d not in order)
                    yield temporal, spatial, p, keeps


def _spatial_moves(state: State, at: int, room: int, allowed: str) -> Iterator[State]:
    """One prime between the PE array (level `at`) and a temporal loop, either way."""
    temporal, spatial, perms, keeps = state
    used = 1
    for v in spatial[at].values():
        used *= v
    for dim in sorted(spatial[at]):
        for p in sorted(set(primes(spatial[at][dim]))):
            for j in range(len(temporal)):
                t, s = [dict(x) for x in temporal], [dict(x) for x in spatial]
                _moved(s, at, t, j, dim, p)
                yield t, s, perms, keeps
    for j, level in enumerate(temporal):
        for dim in sorted(d for d in level if d in allowed):
            p = primes(level[dim])[0]
            if used * p <= room:
                t, s = [dict(x) for x in temporal], [dict(x) for x in spatial]
                _moved(t, j, s, at, dim, p)
                yield t, s, perms, keeps
            for other in sorted(d for d in spatial[at] if d != dim):  # swap: p in, q out
                for q in sorted(set(primes(spatial[at][other]))):
                    if used // q * p <= room:
                        t, s = [dict(x) for x in temporal], [dict(x) for x in spatial]
                        _moved(t, j, s, at, dim, p)
                        _moved(s, at, t, j, other, q)
                        yield t, s, perms, keeps


def _bypass_moves(state: State, arch: ArchSpec, mapping: Mapping) -> Iterator[State]:
    temporal, spatial, perms, keeps = state
    for i in range(1, len(arch.levels)):
        own = set(mapping.keeps(arch, i))
        for tensor in TENSORS:
            k = list(keeps)
            k[i] = tuple(t for t in TENSORS if (t in own) != (t == tensor))
            yield temporal, spatial, perms, k


def _neighbours(arch: ArchSpec, mapping: Mapping, allowed: str, bypass: bool) -> Iterator[State]:
    state = _state(mapping)
    yield from _order_moves(state)
    yield from _factor_moves(state, len(arch.levels))
    yield from _swap_moves(state)
    at = fanout_level(arch)
    if at is not None:
        yield from _spatial_moves(state, at, arch.levels[at].fanout, allowed)
    if bypass:
        yield from _bypass_moves(state, arch, mapping)


def refine(arch: ArchSpec, problem: Problem, start: AccelResult,
           score: Callable[[AccelResult], tuple], allowed: str, bypass: bool = False,
           budget: int = 1500) -> AccelResult:
    """First-improvement descent from `start` over single moves; `allowed`: dims the PE array
    may split; `budget`: at most this many mappings costed. Never worse than `start`."""
    best, best_score, spent = start, score(start), 0
    improved = True
    while improved and spent < budget:
        improved = False
        for t, s, p, k in _neighbours(arch, best.mapping, allowed, bypass):
            mapping = build(arch, t, s, p, k)
            if not tile_fits(arch, problem, mapping):
                continue
            res = evaluate_mapping(arch, problem, mapping, check=False)
            spent += 1
            if score(res) < best_score:
                best, best_score, improved = res, score(res), True
                break
            if spent >= budget:
                break
    return best
