"""Serving pictures: empirical CDFs of per-request latencies (TTFT, TPOT, E2E) of one or
several runs, and latency-throughput curves of a QPS sweep (one curve per configuration):
the knee where latency takes off is the capacity a deployment can promise."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.report._figure import colors, new_figure, time_unit

__all__ = ["cdf_figure", "empirical_cdf", "require_columns", "throughput_latency_figure"]

_LABELS = {"ttft_s": "time to first token", "tpot_s": "time per output token",
           "e2e_s": "end-to-end latency", "queueing_delay_s": "queueing delay"}


def require_columns(table: pd.DataFrame, field: str, columns: Sequence[str]) -> None:
    """InputError naming `field` when a column is missing, listing the table's columns."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise InputError(field, f"no column {missing[0]!r} in the table",
                         [str(c) for c in table.columns])


def empirical_cdf(values) -> tuple[np.ndarray, np.ndarray]:
    """(sorted values, F) with F[i] = (i + 1) / n: the empirical CDF at each sample, NaN
    samples (e.g. TPOT of one-token requests) left out. F rises to exactly 1."""
    v = np.asarray(values, dtype=float)
    v = np.sort(v[~np.isnan(v)])
    return v, np.arange(1, len(v) + 1) / max(len(v), 1)


def cdf_figure(requests, metrics: Sequence[str] = ("ttft_s", "tpot_s"),
               title: str | None = None):
    """One panel per metric (a per-request column in seconds), one step curve per run
    (`requests`: a per-request table such as `perfcast serve --out` writes, or a mapping
    label -> table), dashed lines at each run's p50 and p99."""
    runs = dict(requests) if isinstance(requests, Mapping) else {"run": requests}
    metrics = list(metrics)
    if not metrics:
        raise InputError("metrics", "name at least one column", list(_LABELS))
    for table in runs.values():
        require_columns(table, "metrics", metrics)
    fig, axes = new_figure(4.2 * len(metrics) + 0.6, 4.2, 1, len(metrics))
    axes = np.atleast_1d(axes)
    palette = colors(len(runs))
    for ax, metric in zip(axes, metrics, strict=True):
        largest = max(float(np.nanmax(t[metric].to_numpy(dtype=float), initial=0.0))
                      for t in runs.values())
        unit, factor = time_unit(largest)
        for color, (label, table) in zip(palette, runs.items(), strict=True):
            x, f = empirical_cdf(table[metric])
            if not len(x):
                continue
            ax.step(x * factor, f, where="post", color=color, label=str(label),
                    gid=f"cdf:{label}:{metric}")
            for q, ls in ((0.5, ":"), (0.99, "--")):
                ax.axvline(np.quantile(x, q) * factor, color=color, ls=ls, lw=0.8)
        ax.set_xlabel(f"{_LABELS.get(metric, metric)} ({unit})")
        ax.set_ylabel("fraction of requests")
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
        ax.set_title(f"{metric}: dotted p50, dashed p99", fontsize=9)
        ax.legend(fontsize=8)
    fig.suptitle(title or "Per-request latency CDFs")
    return fig


def throughput_latency_figure(table: pd.DataFrame, x: str = "throughput_tok_s",
                              y: Sequence[str] | str = ("e2e_s.p50", "e2e_s.p99"),
                              group: Sequence[str] | str | None = None,
                              order: str | None = "qps", title: str | None = None):
    """Latency (`y`, seconds; several columns drawn as solid, dashed, dotted...) against
    throughput (`x`), one curve per configuration (distinct values of the `group`
    columns), points joined in increasing `order` (offered QPS when the table has it)."""
    ys = [y] if isinstance(y, str) else list(y)
    groups = [group] if isinstance(group, str) else list(group or [])
    by = order if order in table.columns else x
    require_columns(table, "x", [x])
    require_columns(table, "y", ys)
    require_columns(table, "group", groups)
    if table.empty:
        raise InputError("table", "has no rows", "a sweep result table")
    unit, factor = time_unit(float(np.nanmax(table[ys].to_numpy(dtype=float))))
    fig, ax = new_figure(11.0, 5.0)
    parts = list(table.groupby(groups, sort=True)) if groups else [("all", table)]
    styles = ("-", "--", ":", "-.")
    for color, (key, rows) in zip(colors(len(parts)), parts, strict=True):
        rows = rows.sort_values(by, kind="stable")
        name = ", ".join(f"{g}={v}" for g, v in zip(groups, np.atleast_1d(key), strict=True))
        for i, col in enumerate(ys):
            ax.plot(rows[x], rows[col] * factor, marker="o", ms=3.5, color=color,
                    ls=styles[i % len(styles)], label=f"{name or 'all'}: {col}" if len(ys) > 1
                    else (name or col), gid=f"curve:{name}:{col}")
    ax.set_xlabel(x)
    ax.set_ylabel(f"latency ({unit})")
    ax.set_title(title or f"Latency vs throughput ({', '.join(ys)})")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig
