"""Pareto fronts of cost against latency: the configurations no other one beats on both
(lower or equal cost and latency, strictly lower in one). Everything else is a worse buy."""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.report._figure import new_figure
from perfcast.report._serving import require_columns

__all__ = ["pareto_figure", "pareto_front"]


def pareto_front(table: pd.DataFrame, cost: str, latency: str) -> pd.DataFrame:
    """The non-dominated rows of `table` (both columns minimised; negate a column to
    maximise it), in increasing cost, rows with NaN in either column left out. Exact
    duplicates of a front point are all kept (neither dominates the other)."""
    require_columns(table, "cost", [cost])
    require_columns(table, "latency", [latency])
    rows = table.dropna(subset=[cost, latency])
    if rows.empty:
        return rows
    c, lat = rows[cost].to_numpy(dtype=float), rows[latency].to_numpy(dtype=float)
    order = np.lexsort((lat, c))
    c, lat = c[order], lat[order]
    # best latency among rows of strictly lower cost, and among rows of equal cost
    group_start = np.r_[0, np.flatnonzero(np.diff(c)) + 1]
    sizes = np.diff(np.r_[group_start, len(c)])
    group_min = lat[group_start]  # sorted by latency inside a cost group
    before = np.r_[np.inf, np.minimum.accumulate(group_min)[:-1]]
    keep = (np.repeat(before, sizes) > lat) & (lat <= np.repeat(group_min, sizes))
    return rows.iloc[order[keep]]


def pareto_figure(table: pd.DataFrame, cost: str, latency: str, label: str | None = None,
                  title: str | None = None):
    """Every configuration as a grey point, the Pareto front as a red staircase with its
    points labelled by the `label` column when given."""
    front = pareto_front(table, cost, latency)
    if front.empty:
        raise InputError("table", f"no row with both {cost!r} and {latency!r}",
                         "a sweep result table")
    if label is not None:
        require_columns(table, "label", [label])
    fig, ax = new_figure(8.0, 5.0)
    ax.scatter(table[cost], table[latency], s=14, color="0.6", label="configurations",
               gid="all")
    ax.step(front[cost], front[latency], where="post", color="tab:red", lw=1.2)
    ax.scatter(front[cost], front[latency], s=30, color="tab:red", zorder=3,
               label=f"Pareto front ({len(front)})", gid="front")
    if label is not None:
        for x, y, name in front[[cost, latency, label]].itertuples(index=False, name=None):
            ax.annotate(str(name), (x, y), xytext=(4, 4),
                        textcoords="offset points", fontsize=7)
    ax.set_xlabel(cost)
    ax.set_ylabel(latency)
    ax.set_title(title or f"Pareto front: {latency} vs {cost}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig
