"""Residual corrections of the physical kernel model, stored as plain JSON.

What the physical form misses (tile-shape efficiency, L2 reuse, kernel selection) shows up as
a smooth function of where a kernel sits on its device. `ResidualGrid` (shared by all devices,
the cross-generation tier) is an additive table of mean log-errors over half-octave cells of
the device-normalised coordinates of `regime_coords` — balance, size, occupancy, depth —
shrunk toward zero. `NeighbourResidual` (one device's own, the target-measured tier)
interpolates that device's measured residuals between nearby measured shapes."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from perfcast.kernels._moe import MOE_FAMILY, moe_loads

__all__ = ["NeighbourResidual", "ResidualGrid", "nearest", "regime_bins"]

# (scope, dims of (balance, size, occupancy, depth)): main effects, then pairs, then the full
# cell, first shared by all kernel variants (so a variant never measured still gets them), then
# per variant.
_DIMS = ((0,), (1,), (2,), (3,), (0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3), (0, 1, 2, 3))
_LEVELS = tuple(("any", d) for d in _DIMS[:-1]) + tuple(("variant", d) for d in _DIMS)


def _shape(ops: pd.DataFrame) -> list[np.ndarray]:
    """(b·m, n, k): total rows (GEMM rows over all groups, query rows over all heads), width,
    depth. MoE rows: rows routed to the measured EP rank and width x active experts (the
    weights read), so neighbours share routing skew and expert parallelism, not just shape."""
    b, m, n, k = (ops[c].to_numpy(dtype=float) for c in ("b", "m", "n", "k"))
    rows, width = b * m, n
    moe = (ops["family"] == MOE_FAMILY).to_numpy()
    if moe.any():
        loads = moe_loads(ops[moe])
        rows, width = rows.copy(), width.copy()
        rows[moe], width[moe] = loads[:, 0], n[moe] * loads[:, 1]
    return [rows, width, k]


def regime_bins(regime: np.ndarray, per_unit: float = 2.0) -> np.ndarray:
    """Half-octave integer bins of device-normalised coordinates (see regime_coords)."""
    return np.clip(np.floor(regime * per_unit), -60, 60).astype(int)


_BIN_OFFSET, _BIN_BITS, _VARIANT_SHIFT = 60, 7, 28  # bins in [-60, 60] -> 7 bits, 4 dims


def _pack(bins: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    """Bins of the chosen dims packed into one int64 per row (7 bits each)."""
    out = np.zeros(len(bins), dtype=np.int64)
    for i, d in enumerate(dims):
        out |= (bins[:, d].astype(np.int64) + _BIN_OFFSET) << (_BIN_BITS * i)
    return out


def _level_name(level: tuple[str, tuple[int, ...]]) -> str:
    return f"{level[0]}:{''.join('bsod'[i] for i in level[1])}"


_LEVEL_NAMES = tuple(_level_name(level) for level in _LEVELS)


def _keys(bins: np.ndarray, dtypes: np.ndarray, level: tuple[str, tuple[int, ...]]
          ) -> np.ndarray:
    scope, dims = level
    shape = [",".join(map(str, row)) for row in bins[:, list(dims)]]
    if scope == "any":
        return np.array(shape, dtype=object)
    return np.array([f"{d}|{s}" for d, s in zip(dtypes, shape, strict=True)], dtype=object)


@dataclass
class ResidualGrid:
    """log(measured / modelled) per cell, summed over main-effect, pair and full-cell levels."""

    cells: dict[str, dict[str, float]] = field(default_factory=dict)
    shrink_rows: float = 5.0
    _compiled: dict | None = field(default=None, repr=False, compare=False)

    @classmethod
    def fit(cls, bins: np.ndarray, variants: np.ndarray, log_residual: np.ndarray,
            shrink_rows: float = 5.0, min_rows: int = 3) -> ResidualGrid:
        """Means per cell, each level fitted on what the coarser levels leave unexplained."""
        grid = cls(shrink_rows=shrink_rows)
        remaining = np.asarray(log_residual, dtype=float).copy()
        variants = np.asarray(variants, dtype=object)
        variant_bits = pd.factorize(variants)[0].astype(np.int64) << _VARIANT_SHIFT
        for level in _LEVELS:
            # cells grouped as packed integers (bins within +-60: regime_bins), named as
            # strings only for the cells kept; pandas sums each cell as before (Kahan)
            packed = _pack(bins, level[1]) | (variant_bits if level[0] == "variant" else 0)
            _, first, cell = np.unique(packed, return_index=True, return_inverse=True)
            sums = pd.Series(remaining).groupby(cell).sum().to_numpy()
            counts = np.bincount(cell[~np.isnan(remaining)], minlength=len(first))
            keep = counts >= min_rows
            means = (sums[keep] / (counts[keep] + shrink_rows)).round(6)
            keys = _keys(bins[first[keep]], variants[first[keep]], level)
            grid.cells[_level_name(level)] = {k: float(v) for k, v in
                                              sorted(zip(keys, means, strict=True))}
            per_cell = np.zeros(len(counts))
            per_cell[keep] = means
            remaining -= per_cell[cell]
        return grid

    def correction(self, bins: np.ndarray, variants: np.ndarray) -> np.ndarray:
        """Summed log-corrections of all levels for each row (0 where a cell is unseen).
        Vectorised: cells are looked up as packed integers in sorted arrays."""
        compiled = self._compile()
        codes, uniques = pd.factorize(np.asarray(variants, dtype=object))
        ids = np.array([compiled["variants"].get(v, -1) for v in uniques], dtype=np.int64)
        row_ids = ids[codes] if len(codes) else np.zeros(0, dtype=np.int64)
        variant_bits = np.maximum(row_ids, 0) << _VARIANT_SHIFT
        known = row_ids >= 0
        total = np.zeros(len(bins))
        packs: dict[tuple[int, ...], np.ndarray] = {}  # the 'any' and 'variant' levels share
        for level, name in zip(_LEVELS, _LEVEL_NAMES, strict=True):
            keys, values = compiled["levels"][name]
            if not len(keys):
                continue
            packed = packs.get(level[1])
            if packed is None:
                packed = packs[level[1]] = _pack(bins, level[1])
            if level[0] == "variant":
                packed = packed | variant_bits
            pos = np.searchsorted(keys, packed)
            np.minimum(pos, len(keys) - 1, out=pos)
            hit = keys[pos] == packed
            if level[0] == "variant":
                hit &= known
            total += np.where(hit, values[pos], 0.0)
        return total

    def _compile(self) -> dict:
        """Integer-keyed sorted tables built once from the JSON string keys (the bins of all
        of a level's keys parsed and packed in one vectorised pass)."""
        if self._compiled is None:
            variants: dict[str, int] = {}
            levels = {}
            for level in _LEVELS:
                name = _level_name(level)
                table = self.cells.get(name, {})
                if not table:
                    levels[name] = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=float))
                    continue
                if level[0] == "variant":  # "<variant>|<bins>", split in one C-level pass
                    parts = "|".join(table).split("|")
                    if len(parts) != 2 * len(table):  # a variant named with '|'
                        parts = [p for key in table for p in key.rpartition("|")[::2]]
                    names, cells = parts[::2], parts[1::2]
                else:
                    cells = list(table)
                width = cells[0].count(",") + 1
                flat = np.fromstring(",".join(cells), dtype=np.int64, sep=",")  # C-level parse
                packed = _pack(flat.reshape(len(cells), width), tuple(range(width)))
                if level[0] == "variant":
                    ids = [variants.setdefault(v, len(variants)) for v in names]
                    packed = packed | (np.array(ids, dtype=np.int64) << _VARIANT_SHIFT)
                values = np.fromiter(table.values(), dtype=float, count=len(table))
                order = np.argsort(packed)
                levels[name] = (packed[order], values[order])
            self._compiled = {"variants": variants, "levels": levels}
        return self._compiled

    def to_dict(self) -> dict:
        return {"shrink_rows": self.shrink_rows, "cells": self.cells}

    @classmethod
    def from_dict(cls, data: dict) -> ResidualGrid:
        return cls(cells=data["cells"], shrink_rows=data["shrink_rows"])


@dataclass
class NeighbourResidual:
    """A device's own measured residuals, interpolated by inverse-distance over the nearest
    sampled shapes of the same kernel variant in log2 (b·m, n, k) — the target-measured tier's
    last correction. Points far from every sample fade back to no correction."""

    # variant -> rows of [log2 b·m, log2 n, log2 k, log residual]: numpy arrays (a shipped
    # calibration holds ~8·10^4 rows: as nested lists of floats they took ~16 MB)
    points: dict[str, np.ndarray]
    neighbours: int = 6
    prior_distance: float = 3.0  # a zero-residual pseudo-neighbour at this distance
    _trees: dict = field(default_factory=dict, repr=False, compare=False)  # built on first use

    def __post_init__(self) -> None:
        self.points = {k: np.asarray(v, dtype=float).reshape(-1, 4)
                       for k, v in self.points.items()}

    @classmethod
    def fit(cls, ops: pd.DataFrame, keys: np.ndarray, log_residual: np.ndarray,
            max_points: int = 4000, seed: int = 0) -> NeighbourResidual:
        coords = _log_shape(ops)
        pts = np.column_stack([coords, np.asarray(log_residual, dtype=float)])
        out: dict[str, np.ndarray] = {}
        for key in sorted(set(keys)):
            own = pts[keys == key]
            if len(own) > max_points:
                keep = np.random.default_rng(seed).choice(len(own), max_points, replace=False)
                own = own[np.sort(keep)]
            out[str(key)] = np.round(own, 5)
        return cls(points=out)

    def correction(self, ops: pd.DataFrame, keys: np.ndarray) -> np.ndarray:
        out = np.zeros(len(ops))
        coords = _log_shape(ops)
        for key in set(keys):
            pts = self.points.get(key)
            if pts is None or not len(pts):
                continue
            sel = keys == key
            dist, idx = self._nearest(key, coords[sel], min(self.neighbours, len(pts)))
            w = 1.0 / (dist + 0.25) ** 2
            prior = 1.0 / (self.prior_distance + 0.25) ** 2
            out[sel] = (w * pts[idx, 3]).sum(axis=1) / (w.sum(axis=1) + prior)
        return out

    def _nearest(self, key: str, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """`nearest` over the variant's samples: directly for small batches (no scipy import
        on a command's start-up), through a KD-tree's candidates for large ones."""
        pts = self.points[key][:, :3]
        if len(queries) * len(pts) <= _DIRECT_PAIRS:
            return nearest(pts, queries, k)
        if key not in self._trees:
            from scipy.spatial import cKDTree  # ~0.5 s to import: large batches only

            self._trees[key] = cKDTree(pts)
        return nearest(pts, queries, k, self._trees[key])

    def __eq__(self, other: object) -> bool:  # arrays compare elementwise: compare values
        return isinstance(other, NeighbourResidual) and self.to_dict() == other.to_dict()

    def to_dict(self) -> dict:
        return {"points": {k: v.tolist() for k, v in self.points.items()},
                "neighbours": self.neighbours, "prior_distance": self.prior_distance}

    @classmethod
    def from_dict(cls, data: dict) -> NeighbourResidual:
        return cls(**data)


_DIRECT_PAIRS = 1 << 23  # query x sample pairs up to which no KD-tree is built (~0.1 s)
_CHUNK_PAIRS = 1 << 20  # pairs whose distances are held at once
_SPARE = 8  # candidates beyond k proposed per query, so that ties at the k-th are all seen
_SLACK = 1e-6  # squared-distance margin under which a candidate set counts as possibly short


def nearest(pts: np.ndarray, queries: np.ndarray, k: int, tree: object | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
    """(distances, indices), each (len(queries), k): every query's k nearest rows of `pts` in
    Euclidean distance, ordered by (distance, index) — one answer however they are found.
    Candidates (k + _SPARE per query) come from `tree` (a scipy cKDTree over `pts`) or from
    approximate distances to every row; they are ranked here on exact distances, and a query
    whose k-th might tie or beat a row outside its candidates is ranked over every row."""
    m = min(k + _SPARE, len(pts))
    if tree is None:
        parts = [_candidates(pts, queries[i:i + _chunk(pts)], m)
                 for i in range(0, len(queries), _chunk(pts))]
        cand = np.concatenate(parts) if parts else np.zeros((0, m), dtype=np.intp)
    else:
        cand = tree.query(queries, k=m)[1].reshape(len(queries), m)
    dist, idx = _ranked(pts, queries, cand, m)
    dist, idx, kth, last = dist[:, :k].copy(), idx[:, :k].copy(), dist[:, k - 1], dist[:, -1]
    if m < len(pts):
        unsure = np.flatnonzero(last ** 2 <= kth ** 2 + _SLACK)
        for i in range(0, len(unsure), _chunk(pts)):
            rows = unsure[i:i + _chunk(pts)]
            every = np.broadcast_to(np.arange(len(pts)), (len(rows), len(pts)))
            dist[rows], idx[rows] = _ranked(pts, queries[rows], every, k)
    return dist, idx


def _chunk(pts: np.ndarray) -> int:
    return max(1, _CHUNK_PAIRS // len(pts))


def _candidates(pts: np.ndarray, queries: np.ndarray, m: int) -> np.ndarray:
    """Indices of each query's m nearest rows by |q|² - 2 q·p + |p|² (rounding ~1e-12, far
    under _SLACK), unordered."""
    if m == len(pts):
        return np.broadcast_to(np.arange(len(pts)), (len(queries), len(pts)))
    d2 = (queries ** 2).sum(axis=1)[:, None] - 2.0 * queries @ pts.T
    d2 += (pts ** 2).sum(axis=1)[None, :]
    return np.argpartition(d2, m - 1, axis=1)[:, :m]


def _ranked(pts: np.ndarray, queries: np.ndarray, cand: np.ndarray, k: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """The k best of each query's candidate rows by (distance, index)."""
    diff = pts[cand] - queries[:, None, :]
    dist = np.sqrt(np.einsum("qcd,qcd->qc", diff, diff))
    order = np.lexsort((cand, dist), axis=-1)[:, :k]
    return np.take_along_axis(dist, order, 1), np.take_along_axis(cand, order, 1)


def _log_shape(ops: pd.DataFrame) -> np.ndarray:
    return np.column_stack([np.log2(np.maximum(c, 1.0)) for c in _shape(ops)])
