"""Building blocks of the serving step model: op rows synthesised from a few exact `step_ops`
probes, and lazily priced tensor-product grids interpolated multilinearly.

A step's rows split into parts that each depend on one or a few batch statistics. Within a
part every numeric op-table column is linear in a small feature vector of those statistics
(e.g. decode attention: [1, n, S, S·n] in sequences S and mean keys n), so a handful of
`step_ops` calls fixes the coefficients and any grid cell's rows follow without rebuilding the
table. The fit is checked on a batch it was not fitted on; a part that is not linear (MoE
routing) returns None and is priced by `step_ops` per grid point instead.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

import numpy as np
import pandas as pd

from perfcast.ops import COLUMNS

__all__ = ["LazyGrid", "LinearRows", "geometric", "locate"]

BLOCK_CELLS = 2048  # cells priced together when a query first touches their block
MEMO_MAX = 1 << 16  # answers `total` remembers (forgotten all at once beyond this)

NUMERIC = ("b", "m", "n", "k", "flops", "bytes_read", "bytes_written")
_EXACT = 1e-9  # relative misfit above which a part is not linear in its features


def geometric(low: float, high: float, per_octave: int, integer: bool = False) -> np.ndarray:
    """Log-spaced points from low to high inclusive."""
    if high <= low:
        return np.array([float(low)])
    n = max(int(np.ceil(np.log2(high / low) * per_octave)), 1) + 1
    pts = np.geomspace(low, high, n)
    return np.unique(np.round(pts)) if integer else pts


def _snap(coef: np.ndarray) -> np.ndarray:
    """Coefficients within rounding error of a multiple of 2^-16 made exactly that, so
    integer statistics give exactly the shapes step_ops writes (ceil(n / tile) is exact)."""
    snapped = np.round(coef * 65536.0) / 65536.0
    close = np.abs(snapped - coef) <= 1e-9 * np.maximum(np.abs(coef), 1.0)
    return np.where(close, snapped, coef)


class LinearRows:
    """Op rows of one part as coefficients: column = features @ coef (per template row)."""

    def __init__(self, template: pd.DataFrame, coef: np.ndarray):
        self.template = template.reset_index(drop=True)  # text columns and counts
        self.coef = coef  # (features, rows, numeric columns)
        # the template's other columns as numpy arrays (text as objects), tiled per query
        self._fixed = {c: self.template[c].to_numpy(dtype=object if c != "count" else None)
                       for c in COLUMNS if c not in NUMERIC}

    @classmethod
    def fit(cls, tables: list[pd.DataFrame], features: np.ndarray,
            check: pd.DataFrame, check_features: np.ndarray) -> LinearRows | None:
        keys = [list(zip(t["layer"], t["op"], strict=True)) for t in [*tables, check]]
        if any(k != keys[0] for k in keys) or not keys[0]:
            return None
        values = np.stack([t[list(NUMERIC)].to_numpy(dtype=float) for t in tables])
        flat = values.reshape(len(tables), -1)
        coef, *_ = np.linalg.lstsq(features, flat, rcond=None)
        fitted = np.vstack([features, check_features[None, :]]) @ coef
        truth = np.vstack([flat, check[list(NUMERIC)].to_numpy(dtype=float).reshape(1, -1)])
        if np.max(np.abs(fitted - truth) / np.maximum(np.abs(truth), 1.0)) > _EXACT:
            return None
        return cls(tables[0], _snap(coef).reshape(features.shape[1], *values.shape[1:]))

    def rows(self, features: np.ndarray) -> pd.DataFrame:
        """The part's rows for each feature vector (n vectors -> n x template rows, grouped
        by vector)."""
        n, r = len(features), len(self.template)
        vals = np.einsum("nf,frc->nrc", features, self.coef).reshape(n * r, len(NUMERIC))
        tile = np.tile(np.arange(r), n)
        cols = {}
        for col in COLUMNS:
            if col in NUMERIC:
                cols[col] = vals[:, NUMERIC.index(col)]
            elif col == "count":
                cols[col] = self._fixed[col][tile]
            else:  # object dtype kept (no re-inference as arrow strings: cheap to take/test)
                cols[col] = pd.Series(self._fixed[col][tile], dtype=object, copy=False)
        cols["b"] = np.maximum(np.rint(cols["b"]), 1).astype("int64")
        return pd.DataFrame(cols)


def locate(axis: list[float], x: float) -> tuple[int, float]:
    """Lower cell index and weight of x on a sorted axis (clamped at both ends)."""
    i = min(max(bisect_right(axis, x) - 1, 0), len(axis) - 2) if len(axis) > 1 else 0
    if len(axis) == 1:
        return 0, 0.0
    lo, hi = axis[i], axis[i + 1]
    w = (x - lo) / (hi - lo)
    return i, 0.0 if w < 0 else 1.0 if w > 1 else w


class LazyGrid:
    """Values (ncols per cell) on a tensor-product grid, priced on first use and kept.

    `price(points (n, D)) -> (n, ncols)` seconds; interpolation is multilinear in the raw
    coordinates, so monotone grid values give a monotone interpolant. `block`: cells per
    axis priced together (default: ~BLOCK_CELLS cells, the same count along every axis);
    a cell's value never depends on the block it was priced with."""

    def __init__(self, axes: list[np.ndarray], ncols: int,
                 price: Callable[[np.ndarray], np.ndarray], block: tuple[int, ...] | None = None):
        self.axes = [np.asarray(a, dtype=float) for a in axes]
        self.lists = [a.tolist() for a in self.axes]
        self.shape = tuple(len(a) for a in self.axes)
        self.strides = [int(np.prod(self.shape[d + 1:])) for d in range(len(self.shape))]
        self.values = np.full((int(np.prod(self.shape)), ncols), np.nan)
        self.col0 = [float("nan")] * len(self.values)  # column 0 as Python floats
        self.meta = [(a, len(a) - 2, st) for a, st in zip(self.lists, self.strides, strict=True)]
        self.memo: dict = {}  # point (its one coordinate on a 1-D grid) -> `total`
        self.price = price
        side = max(2, round(BLOCK_CELLS ** (1 / len(axes))))
        self.block = np.array([min(n, side if block is None else max(int(b), 1))
                               for n, b in zip(self.shape, block or self.shape, strict=True)])
        self.dense = [int(np.argmin(np.append(a, np.inf) == np.arange(1, len(a) + 2)))
                      for a in self.axes]  # length of the 1, 2, ..., K prefix
        self.corners = [[(c >> d) & 1 for d in range(len(axes))]
                        for c in range(2 ** len(axes))]
        self.offsets = {tuple(b): sum(bit * st for bit, st in zip(b, self.strides, strict=True))
                        for b in self.corners}

    def _fill(self, flat: np.ndarray) -> None:
        """Price every cell of the blocks (~BLOCK_CELLS cells each) holding unpriced cells
        in `flat`: one time-model call per block set instead of one per cell."""
        flat = flat[np.isnan(self.values[flat, 0])]
        if not len(flat):
            return
        idx = np.stack(np.unravel_index(np.unique(flat), self.shape), axis=1)
        blocks = np.unique(idx // self.block, axis=0)
        cells = []
        for blk in blocks:
            axes = [np.arange(b * s, min((b + 1) * s, n))
                    for b, s, n in zip(blk, self.block, self.shape, strict=True)]
            mesh = np.meshgrid(*axes, indexing="ij")
            cells.append(np.ravel_multi_index([g.ravel() for g in mesh], self.shape))
        todo = np.concatenate(cells)
        todo = todo[np.isnan(self.values[todo, 0])]
        idx = np.stack(np.unravel_index(todo, self.shape), axis=1)
        pts = np.stack([self.axes[d][idx[:, d]] for d in range(len(self.shape))], axis=1)
        priced = self.price(pts)
        self.values[todo] = priced
        col = self.col0
        for f, v in zip(todo.tolist(), priced[:, 0].tolist(), strict=True):
            col[f] = v

    def _cell(self, d: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lower index and weight per coordinate; the integer prefix 1..K of an axis is
        indexed directly (no search), the rest by binary search."""
        axis = self.axes[d]
        i = np.floor(x).astype(np.int64) - 1
        far = x > self.dense[d]
        if far.any():
            i[far] = np.searchsorted(axis, x[far], side="right") - 1
        i = np.clip(i, 0, len(axis) - 2)
        return i, np.clip((x - axis[i]) / (axis[i + 1] - axis[i]), 0.0, 1.0)

    def interp(self, points: np.ndarray, ncols: int | None = None) -> np.ndarray:
        """(n, D) points -> (n, ncols) interpolated values (all columns by default)."""
        if any(len(a) == 1 for a in self.axes):
            raise ValueError("every grid axis needs two or more points")
        cells = [self._cell(d, points[:, d]) for d in range(len(self.axes))]
        base = sum(i * self.strides[d] for d, (i, _) in enumerate(cells))
        values = self.values[:, :ncols] if ncols else self.values
        out = 0.0
        for bits in self.corners:
            w = None
            for d, bit in enumerate(bits):
                wd = cells[d][1] if bit else 1.0 - cells[d][1]
                w = wd if w is None else w * wd
            flat = base + self.offsets[tuple(bits)]
            if np.isnan(values[flat, 0]).any():
                self._fill(flat)
            v = values[flat]
            out = out + (w * v[:, 0] if v.shape[1] == 1 and ncols == 1 else w[:, None] * v)
        return out[:, None] if np.ndim(out) == 1 else out

    def total(self, point: tuple[float, ...]) -> float:
        """Column 0 at one point, in plain Python (the single-query hot path): `locate` per
        axis inlined, corners with a zero weight along any axis skipped, the others summed
        in corner order (axis 0 fastest) with weights multiplied axis by axis, as `interp`
        does. Answers are remembered (a priced cell never changes): chunked prefills repeat
        their (sequences, chunk, context) points across requests."""
        memo = self.memo
        key = point[0] if len(point) == 1 else point
        out = memo.get(key)
        if out is not None:
            return out
        fs, ws = [0], [1.0]  # corner cells and weights, in corner order
        for (lst, top, st), x in zip(self.meta, point, strict=True):
            if top < 0:
                continue
            i = bisect_right(lst, x) - 1
            if i < 0:
                i = 0
            elif i > top:
                i = top
            lo = lst[i]
            wd = (x - lo) / (lst[i + 1] - lo)
            if wd <= 0.0:
                if i:
                    o = i * st
                    fs = [f + o for f in fs]
            elif wd >= 1.0:
                o = (i + 1) * st
                fs = [f + o for f in fs]
            else:
                o, a = i * st, 1.0 - wd
                hi = o + st
                fs = [f + o for f in fs] + [f + hi for f in fs]
                ws = [w * a for w in ws] + [w * wd for w in ws]
        col = self.col0
        out = 0.0
        for flat, w in zip(fs, ws, strict=True):
            v = col[flat]
            if v != v:  # not priced yet: price the blocks of all corners at once
                self._fill(np.array(fs))
                v = col[flat]
            out += w * v
        if len(memo) >= MEMO_MAX:
            memo.clear()
        memo[key] = out
        return out
