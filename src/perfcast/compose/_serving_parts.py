"""Construction of the serving step model's parts: which op rows each part holds, the
exact `step_ops` probes that fix a part's linear row map, and the lazily priced grids."""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfcast.compose._serving_grid import LazyGrid, LinearRows, geometric
from perfcast.compose._serving_stats import BatchStats
from perfcast.ops import (
    COMM_FAMILIES,
    Batch,
    OpRows,
    attended_keys,
    layer_name,
    step_ops,
    step_rows,
)

__all__ = ["ATTN_COL", "CATEGORIES", "WHERE", "StepGrids"]

_DRIVER_OPS = {"lm_head": "S", "sampling": "S", "kv_b_proj": "Pt", "q_absorb": "Sd",
               "v_absorb": "Sd", "scan_prefill": "Pt", "state_decode": "Sd"}
CATEGORIES = ("gemm", "attention", "comm", "other")
WHERE = ("first", "layers", "last")  # embedding stage, the layer stack, the head


def _driver(family: str, op: str) -> str:
    if family.startswith("attn_"):
        return family
    return _DRIVER_OPS.get(op, "T")


def _cell_columns(rows: pd.DataFrame) -> np.ndarray:
    """(rows, 1 + 12) one-hot of each row into total + category x where columns."""
    fam = rows["family"].to_numpy(dtype=object)
    cat = np.where(fam == "gemm", 0, np.where(pd.Series(fam).str.startswith("attn_"), 1,
                   np.where(np.isin(fam, list(COMM_FAMILIES)), 2, 3)))
    layer = rows["layer"].to_numpy(dtype=object)
    where = np.where(layer == "embedding", 0, np.where(layer == "head", 2, 1))
    out = np.zeros((len(rows), 1 + len(CATEGORIES) * len(WHERE)))
    out[:, 0] = 1.0
    out[np.arange(len(rows)), 1 + cat * len(WHERE) + where] = 1.0
    return out


def _feat_1d(p: np.ndarray) -> np.ndarray:
    return np.column_stack([np.ones(len(p)), p[:, 0]])


def _feat_decode(p: np.ndarray) -> np.ndarray:
    s, n = p[:, 0], p[:, 1]
    return np.column_stack([np.ones(len(p)), n, s, s * n])


def _feat_prefill(p: np.ndarray, window: float | None = None) -> np.ndarray:
    """Prefill attention features; `window`: pairs counted with it, per sequence of the
    equal split (a windowed layer of a model that mixes windows)."""
    s, q, c, r = p.T
    k, pairs = q + c, r * attended_keys(q, c, window)
    return np.column_stack([np.ones(len(p)), q, k, pairs, s, s * q, s * k, s * pairs])


def _clipped(driver: str, window: float):
    """The feature map of a windowed layer's attention rows: decode keys clipped to the
    window, prefill pairs counted with it."""
    if driver == "attn_decode":
        return lambda p: _feat_decode(np.column_stack([p[:, 0], np.minimum(p[:, 1], window)]))
    return lambda p: _feat_prefill(p, window)


_FEATURES = {"T": _feat_1d, "S": _feat_1d, "Pt": _feat_1d, "Sd": _feat_1d,
             "attn_decode": _feat_decode, "attn_prefill": _feat_prefill}
ATTN_COL = 1 + CATEGORIES.index("attention") * len(WHERE) + WHERE.index("layers")
# Prefill attention cells priced together (sequences, query, context, pairs axes): a workload
# reaches few sequence counts and, for a given query and context, few pairs values, so blocks
# are narrow on those axes (fewer cells priced that are never read; values do not depend on
# the block).
_PREFILL_BLOCK = (2, 16, 8, 4)


class StepGrids:
    """Mixin building the part grids from the attributes ServingStepModel sets (model,
    cluster, precision, plan, time_model, comm_model, limits, window)."""

    # -- construction: exact probes, then lazily priced grids --------------------------
    def _ops(self, batch: Batch, driver: str) -> pd.DataFrame:
        probes = self.__dict__.get("_probes")  # while building: one step_ops call per batch
        ops = None if probes is None else probes.get(batch)
        if ops is None:
            ops = step_ops(self.model, batch, self.precision, self.plan)
            if probes is not None:
                probes[batch] = ops
        keep = [_driver(f, o) == driver for f, o in zip(ops["family"], ops["op"], strict=True)]
        return ops[keep]

    def _rows_per_point(self, tokens: np.ndarray, driver: str) -> pd.DataFrame:
        """The `driver` rows of one prefill step of each token count, one block per count in
        order, as one table: what concatenating `_ops` of each would give, with one frame
        built instead of one per step (the per-point MoE grid prices hundreds at a time)."""
        rows = OpRows()
        for t in tokens:
            step = step_rows(self.model, Batch(prefill_tokens=(int(t),)), self.precision,
                             self.plan)
            rows.rows += [r for r in step.rows if _driver(r["family"], r["op"]) == driver]
        return rows.frame()

    def _price_rows(self, rows: pd.DataFrame, groups: int,
                    onehot: np.ndarray | None = None) -> np.ndarray:
        """Rows in `groups` equal blocks -> (groups, 13) seconds per block and column:
        step_time's per-row prices (kernel model, collectives by the ring model) x count.
        `onehot`: `_cell_columns` of one block's rows when all blocks share them."""
        times = np.asarray(self.time_model.kernel_times(rows, self.cluster.device), float)
        family = rows["family"].to_numpy(dtype=object)
        comm = np.isin(family, list(COMM_FAMILIES))
        if comm.any():
            times[comm] = self.comm_model.collective_times(
                family[comm], rows["m"].to_numpy()[comm], rows["n"].to_numpy()[comm],
                self.cluster)
        total = times * rows["count"].to_numpy(dtype=float)
        if onehot is None:
            per = total[:, None] * _cell_columns(rows)
            return per.reshape(groups, -1, per.shape[1]).sum(axis=1)
        per = total.reshape(groups, -1)[:, :, None] * onehot[None, :, :]
        return per.sum(axis=1)

    def _windows(self, rows: pd.DataFrame) -> np.ndarray:
        """Per attention row, the window its statistics are clipped to here (0: none): the
        attention core of windowed layers when the model mixes windows (else BatchStats
        already clipped them with the uniform window)."""
        m = self.model
        if self.window is not None:
            return np.zeros(len(rows))
        by_layer = {layer_name(m, mix, ffn): m.window_of(mix) or 0
                    for mix, ffn, _ in m.layer_groups()}
        return np.where(rows["op"].to_numpy() == "attn",
                        rows["layer"].map(by_layer).fillna(0).to_numpy(dtype=float), 0.0)

    def _grid(self, axes, driver, batches, points, fallback=None, block=None):
        """(grid or None when the part has no rows, kernel launches of the part)."""
        tables = [self._ops(b, driver) for b in batches]
        if tables[0].empty:
            return None, 0
        pts = np.array(points, dtype=float)
        ncols = 1 if driver.startswith("attn_") else 1 + len(CATEGORIES) * len(WHERE)
        windows = (self._windows(tables[0]) if driver.startswith("attn_")
                   else np.zeros(len(tables[0])))
        parts = []  # (fit, feature map) per window of the part's rows
        for w in np.unique(windows):
            keep = windows == w
            feat = _clipped(driver, w) if w else _FEATURES[driver]
            feats = feat(pts)
            fit = LinearRows.fit([t[keep] for t in tables[:-1]], feats[:-1], tables[-1][keep],
                                 feats[-1])
            parts.append((fit, feat))
        if any(fit is None for fit, _ in parts):
            if fallback is None:
                raise RuntimeError(f"{driver} op rows are not linear in their statistics")
            axes, price = fallback
        else:
            onehots = [_cell_columns(fit.template) for fit, _ in parts]

            def price(pts, parts=parts, onehots=onehots):
                return sum(self._price_rows(fit.rows(feat(pts)), len(pts), onehot)[:, :ncols]
                           for (fit, feat), onehot in zip(parts, onehots, strict=True))
        return LazyGrid(axes, ncols, price, block), int(tables[0]["count"].sum())

    def _build(self) -> None:
        self._probes: dict[Batch, pd.DataFrame] = {}
        max_t, max_s, max_c = self.limits
        dense = min(max_t, 16384)
        t_axis = np.union1d(np.arange(1, dense + 1), geometric(dense, max_t, 64, True))
        s_axis = np.arange(1, max_s + 1)
        j = 64 * np.arange(1, 129)
        sparse = np.unique(np.concatenate([np.arange(1, 65), j, j + 1,
                                           geometric(8192, max(max_t, 8192), 32, True)]))

        def moe_price(pts):  # routing makes MoE rows non-linear in T: price per point
            return self._price_rows(self._rows_per_point(pts[:, 0], "T"), len(pts))

        pre = [Batch(prefill_tokens=(t,)) for t in (1, 2, 3, 77)]
        dec = [Batch(decode_context=(1,) * s) for s in (1, 2, 3, 50)]
        self.t_grid, n_t = self._grid([t_axis], "T", pre, [[1], [2], [3], [77]],
                                      ([sparse[sparse <= max_t]], moe_price))
        self.s_grid, n_s = self._grid([s_axis], "S", dec, [[1], [2], [3], [50]])
        self.pt_grid, n_pt = self._grid([t_axis], "Pt", pre, [[1], [2], [3], [77]])
        self.sd_grid, n_sd = self._grid([s_axis], "Sd", dec, [[1], [2], [3], [50]])
        k = np.arange(1, max_c // 256 + 1)
        n_axis = np.unique(np.concatenate([geometric(1, 256, 16), 256 * k, 256 * k + 1,
                                           256 * k[k < 32] + 128]))
        shapes = [(s, c) for s in (1, 2) for c in (1, 3)]
        batches = [Batch(decode_context=(c,) * s) for s, c in shapes]
        self.decode_grid, n_d = self._grid(
            [np.arange(1, max_s + 1),
             n_axis[n_axis <= max_c + 1]], "attn_decode",
            [*batches, Batch(decode_context=(2, 9, 4))], [*shapes, (3, 5)])
        qc = [(1, 0), (2, 0), (1, 1), (3, 1), (2, 5)]
        batches = [Batch(prefill_tokens=(q,) * s, prefill_context=(c,) * s)
                   for s in (1, 2) for q, c in qc]
        batches.append(Batch(prefill_tokens=(5, 9, 2), prefill_context=(0, 7, 3)))
        stats = BatchStats.concat([BatchStats.of(b, self.window) for b in batches])
        m = 128 * np.arange(1, 65)
        self.prefill_grid, n_p = self._grid(
            [np.union1d(np.arange(1, 5), geometric(4, max_s, 2, True)),
             np.unique(np.concatenate([geometric(1, 128, 8), m, m + 1,
                                       geometric(8192, max(max_t, 8192), 8)])),
             np.concatenate([[0.0], geometric(1, max_c, 3)]), 2.0 ** np.arange(-8, 5)],
            "attn_prefill", batches, np.column_stack(stats.prefill_points()),
            block=_PREFILL_BLOCK)
        self.__dict__.pop("_probes", None)
        self.launches = (n_t, n_s, n_pt, n_sd + n_d, n_p)
