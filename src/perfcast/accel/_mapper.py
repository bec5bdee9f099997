"""Mapper: search the mapspace for the lowest energy, delay or energy-delay product.

Dataflow presets constrain which dims may go spatial (the PE array) and the loop order inside
the PEs. Search: greedy mappings (for every order of the preset's spatial dims and every loop
dim filled first into the buffers, the largest tiles that fit each level, innermost first) seed
it; then random sampling (fresh random factorisations, or a prime factor of the best mapping
moved to another level) with pruning of tiles that overflow a level, stopping after `victory`
consecutive valid non-improving mappings (Timeloop's victory condition) or `max_samples`;
then a deterministic one-move descent (`_refine.py`) from the best mapping of each of the
`starts` best PE-array splits, which takes most of the seed dependence out of the result
(ResNet-50 on eyeriss-like: the widest per-layer energy spread over seeds 0-3 fell from 75%
to about 10%). Seeded: deterministic."""

from __future__ import annotations

import itertools
import math
import random

from perfcast.accel._arch import TENSORS, ArchSpec
from perfcast.accel._cost import AccelResult, evaluate_mapping
from perfcast.accel._mapping import Mapping
from perfcast.accel._nest import tile_fits
from perfcast.accel._problem import DIMS, Problem, tile_words
from perfcast.accel._refine import build as _build
from perfcast.accel._refine import fanout_level as _fanout_level
from perfcast.accel._refine import primes as _primes
from perfcast.accel._refine import refine
from perfcast.errors import InputError, close_matches

__all__ = ["DATAFLOWS", "OBJECTIVES", "default_mapping", "search_mapping"]

# dataflow -> (dims allowed on the PE array, in preference order; loop order inside the PEs,
# innermost first: loops irrelevant to the stationary tensor innermost)
DATAFLOWS: dict[str, tuple[str, str]] = {
    "weight-stationary": ("MC", "QPNSRCM"),
    "output-stationary": ("QPM", "SRCQPMN"),
    "input-stationary": ("CQP", "MSRQPCN"),
    "row-stationary": ("RPMC", "SQCRMPN"),
}
OBJECTIVES: tuple[str, ...] = ("energy", "delay", "edp")
_Factors = list[dict[str, int]]


def _spatial_split(arch: ArchSpec, problem: Problem, dataflow: str,
                   rng: random.Random | None, order: str | None = None) -> _Factors:
    """Spatial factors at the fan-out level: allowed dims (in `order`, default the preset's),
    product <= fan-out."""
    spatial: _Factors = [{} for _ in arch.levels]
    at = _fanout_level(arch)
    if at is None:
        return spatial
    room = arch.levels[at].fanout
    order = list(order or DATAFLOWS[dataflow][0])
    if rng is not None:  # any order of the allowed dims, so every pair can fill the array
        rng.shuffle(order)
    for dim in order:
        divs = [v for v in range(1, problem.dims[dim] + 1)
                if problem.dims[dim] % v == 0 and v <= room]
        value = divs[-1] if rng is None else rng.choice(divs[len(divs) // 2:])
        spatial[at][dim] = value
        room //= value
    return spatial


def _fill(arch: ArchSpec, problem: Problem, spatial: _Factors, perms: list[str],
          rng: random.Random | None) -> _Factors:
    """Temporal factors, innermost level first, each level as large as fits (rng: a random
    share of it); the rest at the outermost level."""
    left = {d: problem.dims[d] // max(1, _prod(spatial, d)) for d in DIMS}
    temporal: _Factors = [{} for _ in arch.levels]
    tile = dict.fromkeys(DIMS, 1)  # bounds of level i's tile: its loops and everything below
    for i in range(len(arch.levels) - 1, 0, -1):
        for dim, value in spatial[i].items():
            tile[dim] *= value
        order = list(perms[i])
        if rng is not None:
            rng.shuffle(order)
        for dim in order:
            for p in _primes(left[dim]):
                if rng is not None and rng.random() < 0.3:
                    continue
                tile[dim] *= p
                if _fits_up_to(arch, problem, spatial, tile, i):
                    temporal[i][dim] = temporal[i].get(dim, 1) * p
                    left[dim] //= p
                else:  # pruned: the tile would overflow this level
                    tile[dim] //= p
                    break
    temporal[0] = left
    return temporal


def _fits_up_to(arch: ArchSpec, problem: Problem, spatial: _Factors, tile: dict[str, int],
                i: int) -> bool:
    """Level i's tile fits, and so do those of the (still empty) levels above it down to 1,
    which hold it: a loop at a level that bypasses a tensor still grows it above."""
    tile = dict(tile)
    for j in range(i, 0, -1):
        if j < i:
            for dim, value in spatial[j].items():
                tile[dim] *= value
        lvl = arch.levels[j]
        if lvl.capacity_words is not None and \
                sum(tile_words(problem, t, tile) for t in lvl.keeps) > lvl.capacity_words:
            return False
    return True


def _prod(factors: _Factors, dim: str) -> int:
    out = 1
    for f in factors:
        out *= f.get(dim, 1)
    return out


def _perms(arch: ArchSpec, dataflow: str, rng: random.Random | None) -> list[str]:
    inner = DATAFLOWS[dataflow][1]
    at = _fanout_level(arch) or 0
    perms = []
    for i in range(len(arch.levels)):
        order = list(inner)
        if rng is not None and i <= at:
            rng.shuffle(order)
        perms.append("".join(order))
    return perms


def _score(res: AccelResult, objective: str) -> tuple[float, ...]:
    """Lower is better; ties on the objective go to the other of energy and delay."""
    if objective == "energy":
        return (res.energy_j, res.cycles)
    if objective == "delay":
        return (res.cycles, res.energy_j)
    return (res.energy_j * res.cycles, res.energy_j)


def _check_choice(field: str, value: str, allowed: tuple[str, ...] | list[str]) -> None:
    if value not in allowed:
        hint = close_matches(value, allowed) or list(allowed)
        raise InputError(field, f"unknown {field} {value!r}; did you mean {', '.join(hint)}?",
                         allowed)


def default_mapping(arch: ArchSpec, problem: Problem, dataflow: str = "row-stationary") -> Mapping:
    """The preset's greedy mapping: widest spatial split, then the largest tiles that fit."""
    _check_choice("dataflow", dataflow, tuple(DATAFLOWS))
    perms = _perms(arch, dataflow, None)
    spatial = _spatial_split(arch, problem, dataflow, None)
    return _build(arch, _fill(arch, problem, spatial, perms, None), spatial, perms)


def _greedy_starts(arch: ArchSpec, problem: Problem, dataflow: str) -> list[Mapping]:
    """The greedy mapping for every order of the preset's spatial dims (one per distinct PE
    array split) and each loop dim filled first into the buffers: a deterministic spread of
    starting points, so that a good split does not hang on one seed's luck."""
    base, seen, out = _perms(arch, dataflow, None), set(), []
    firsts = ["", *(d for d in DIMS if problem.dims[d] > 1)]
    for order in itertools.permutations(DATAFLOWS[dataflow][0]):
        spatial = _spatial_split(arch, problem, dataflow, None, "".join(order))
        for first in firsts:
            perms = [first + p.replace(first, "") if first else p for p in base]
            mapping = _build(arch, _fill(arch, problem, spatial, perms, None), spatial, perms)
            key = mapping.model_dump_json()
            if key not in seen:
                seen.add(key)
                out.append(mapping)
    return out


def _mutate(arch: ArchSpec, best: Mapping, rng: random.Random,
            bypass: bool) -> tuple[_Factors, _Factors, list[str], list]:
    """Move one prime factor of one temporal loop to another level; with `bypass`, sometimes
    flip whether a level below the outermost keeps a tensor instead."""
    temporal = [dict(lm.temporal) for lm in best.levels]
    spatial = [dict(lm.spatial) for lm in best.levels]
    perms = [lm.permutation for lm in best.levels]
    keeps = [lm.keeps for lm in best.levels]
    if bypass and len(arch.levels) > 1 and rng.random() < 0.25:
        i = rng.randrange(1, len(arch.levels))
        tensor = rng.choice(TENSORS)
        own = set(best.keeps(arch, i))
        keeps[i] = tuple(t for t in TENSORS if (t in own) != (t == tensor))
        return temporal, spatial, perms, keeps
    src = rng.choice([i for i, t in enumerate(temporal) if t] or [0])
    if temporal[src]:
        dim = rng.choice(sorted(temporal[src]))
        p = rng.choice(_primes(temporal[src][dim]))
        temporal[src][dim] //= p
        dst = rng.randrange(len(temporal))
        temporal[dst][dim] = temporal[dst].get(dim, 1) * p
    return temporal, spatial, perms, keeps


def search_mapping(arch: ArchSpec, problem: Problem, objective: str = "edp",
                   dataflow: str = "row-stationary", seed: int = 0, victory: int = 150,
                   max_samples: int = 3000, bypass: bool = False,
                   refine_budget: int = 1500, starts: int = 6) -> AccelResult:
    """Best mapping found for `objective`; never worse than `default_mapping`. `bypass`:
    then search on from the fixed-keeps best, also choosing which tensors each level below
    the outermost keeps (Timeloop's free bypass): never worse than without. `starts`: how
    many PE-array splits the descent starts from; `refine_budget`: mappings costed per
    descent (0: no descent, the random search alone)."""
    _check_choice("objective", objective, OBJECTIVES)
    rng = random.Random(seed)
    if bypass:
        best = search_mapping(arch, problem, objective, dataflow, seed, victory, max_samples,
                              refine_budget=refine_budget, starts=starts)
    else:
        best = evaluate_mapping(arch, problem, default_mapping(arch, problem, dataflow),
                                check=False)
    fits = tile_fits(arch, problem, best.mapping)  # only a capacity-bound level 0 can fail
    best_score, stale = (_score(best, objective) if fits else (math.inf,)), 0
    elite = {_spatial_key(best): (best_score, best)} if fits else {}
    for mapping in _greedy_starts(arch, problem, dataflow) if fits else ():
        res = evaluate_mapping(arch, problem, mapping, check=False)
        if _spatial_key(res) not in elite or _score(res, objective) < elite[_spatial_key(res)][0]:
            elite[_spatial_key(res)] = (_score(res, objective), res)
    for _ in range(max_samples):
        if stale >= victory:
            break
        fresh = rng.random() < 0.5
        if fresh:
            perms = _perms(arch, dataflow, rng)
            spatial = _spatial_split(arch, problem, dataflow, rng)
            temporal, keeps = _fill(arch, problem, spatial, perms, rng), None
        else:
            temporal, spatial, perms, keeps = _mutate(arch, best.mapping, rng, bypass)
        mapping = _build(arch, temporal, spatial, perms, keeps)
        # fresh samples fit below level 0 by construction; mutations are checked in full
        needs_check = not fresh or arch.levels[0].capacity_words is not None
        if needs_check and not tile_fits(arch, problem, mapping):
            continue  # pruned: a tile overflows its level
        res = evaluate_mapping(arch, problem, mapping, check=False)
        score = _score(res, objective)
        key = _spatial_key(res)
        if key not in elite or score < elite[key][0]:
            elite[key] = (score, res)
        if score < best_score:
            best, best_score, stale, fits = res, score, 0, True
        else:
            stale += 1
    if not fits:
        raise InputError("problem", f"{problem.name} fits no mapping: its tensors exceed "
                         f"{arch.levels[0].name}'s {arch.levels[0].capacity_words} words")
    # one-move descent cannot change a whole PE-array split, so it starts from the best
    # mapping of each of the `starts` best splits: a short descent from each, then the two
    # best on to a local optimum
    def descend(res: AccelResult, budget: int) -> AccelResult:
        return refine(arch, problem, res, lambda r: _score(r, objective),
                      DATAFLOWS[dataflow][0], bypass, budget)

    short = [descend(res, refine_budget // 8) for _, res in
             sorted(elite.values(), key=lambda e: e[0])[:starts]]
    short.sort(key=lambda r: _score(r, objective))
    return min((descend(res, refine_budget) for res in short[:2]),
               key=lambda r: _score(r, objective))


def _spatial_key(res: AccelResult) -> tuple:
    return tuple(tuple(sorted(lm.spatial.items())) for lm in res.mapping.levels)
