"""The suite's report: a coverage table and the target metrics, as Markdown and as JSON."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from perfcast.suite._run import STATUSES, ScenarioResult

__all__ = ["format_value", "suite_markdown", "suite_summary"]

_SCALES = ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"))
_JOULES = ((1.0, "J"), (1e-3, "mJ"), (1e-6, "uJ"), (1e-9, "nJ"), (1e-12, "pJ"))
_RATES = (("_tok_s", "tok/s"), ("_req_s", "req/s"), ("tokens_per_s", "tok/s"),
          ("images_per_s", "img/s"), ("_per_s", "/s"))


def _seconds(value: float) -> str:
    for scale, unit in _SCALES:
        if abs(value) >= scale:
            return f"{value / scale:.4g} {unit}"
    return f"{value:.3g} s"


def format_value(path: str, value: Any, unit: str | None = None) -> str:
    """A target value for people: in `unit` when the target declares one, else in the unit
    its key's suffix names (`_s`, `_bytes`, `_j`, `_tok_s`, ...)."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, int | float):
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        return text if len(text) <= 60 else text[:57] + "..."
    if unit is not None:
        return _in_unit(value, unit)
    leaf = path.rsplit(".", 1)[-1]
    rate = next((unit for suffix, unit in _RATES if leaf.endswith(suffix)), None)
    if rate:
        return f"{value:,.0f} {rate}" if abs(value) >= 1000 else f"{value:.4g} {rate}"
    if leaf.endswith("_s") or leaf in {"mean", "p50", "p90", "p99"} and "_s." in path:
        return _seconds(value)
    if leaf.endswith("_bytes") or leaf in {"weights", "activations", "gradients", "optimizer"}:
        return f"{value / 1e9:.3g} GB"
    if leaf.endswith("_j"):
        scale, unit = next(((f, u) for f, u in _JOULES if abs(value) >= f), _JOULES[-1])
        return f"{value / scale:.3g} {unit}"
    if leaf in {"mfu", "hfu", "utilization", "bubble_fraction", "prefix_hit_ratio"}:
        return f"{value:.1%}"
    return f"{value:,.0f}" if isinstance(value, int) else f"{value:.4g}"


def _in_unit(value: float, unit: str) -> str:
    if unit == "s":
        return _seconds(value)
    if unit == "bytes":
        return f"{value / 1e9:.3g} GB"
    if unit == "fraction":
        return f"{value:.2%}" if abs(value) < 0.01 else f"{value:.1%}"
    return f"{value:.3g}x"


def suite_summary(results: Sequence[ScenarioResult], wall_s: float | None = None
                  ) -> dict[str, Any]:
    """The report as JSON-ready data: counts per status, then every scenario's values."""
    counts = Counter(r.status for r in results)
    return {
        "scenarios": len(results),
        "counts": {status: counts.get(status, 0) for status in STATUSES},
        "wall_s": wall_s,
        "results": [{"id": r.id, "title": r.title, "category": r.category, "status": r.status,
                     "wall_s": round(r.wall_s, 3), "errors": r.errors,
                     "values": [{"name": v.name, "run": v.run, "path": v.path,
                                 "unit": v.unit, "value": v.value} for v in r.values]}
                    for r in results],
    }


def _metrics_cell(result: ScenarioResult) -> str:
    multi = len({v.run for v in result.values}) > 1
    parts = [f"{v.name}{f' [{v.run}]' if multi else ''} = {format_value(v.path, v.value, v.unit)}"
             for v in result.values]
    return "<br>".join(parts).replace("|", "\\|")


def suite_markdown(results: Sequence[ScenarioResult], wall_s: float | None = None) -> str:
    """Coverage table (SCENARIOS.md's rule) with the metrics each scenario printed."""
    counts = Counter(r.status for r in results)
    lines = ["# perfcast scenario suite", "",
             f"**{counts.get('supported', 0)}/{len(results)} supported**, "
             f"{counts.get('partial', 0)} partial, {counts.get('unsupported', 0)} unsupported"
             + (f"; {wall_s:.1f} s" if wall_s is not None else "") + ".", "",
             "| ID | scenario | status | target metrics |", "|---|---|---|---|"]
    for r in results:
        title = r.title.replace("|", "\\|")
        lines.append(f"| {r.id} | {title} | {r.status} | {_metrics_cell(r)} |")
    errors = [(r.id, run, msg) for r in results for run, msg in r.errors.items()]
    if errors:
        lines += ["", "## Errors", ""]
        lines += [f"- {sid} [{run}]: {msg}" for sid, run, msg in errors]
    return "\n".join(lines) + "\n"
