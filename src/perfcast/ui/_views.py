"""A command's JSON payload -> what the page shows: headline metrics as text, tables and
chart-ready frames. Pure functions; numbers are formatted as the CLI's tables print them,
so a value on the page can be checked against `perfcast <command>` directly."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from perfcast.train import iteration_parts

__all__ = ["breakdown_frame", "cdf_frame", "headline", "latency_frame", "memory_frame",
           "sweep_frame"]

_PERCENTILES = ("mean", "p50", "p90", "p99")


def _ms(seconds: float | None, digits: int = 3) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.{digits}f} ms"


def _gb(n_bytes: float) -> str:
    return f"{n_bytes / 1e9:.2f} GB"


def _infer_headline(p: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [("TTFT", _ms(p["ttft_s"])), ("TPOT", _ms(p["tpot_s"])),
            ("End-to-end", _ms(p["e2e_s"], 1)),
            ("Throughput", f"{p['throughput_tok_s']:,.1f} tok/s"),
            ("Memory per GPU", _gb(p["memory_bytes"]["total_bytes"]))]


def _serve_headline(p: Mapping[str, Any]) -> list[tuple[str, str]]:
    rows = [("TTFT p50", _ms(p["ttft_s"]["p50"], 1)), ("TTFT p99", _ms(p["ttft_s"]["p99"], 1)),
            ("TPOT p50", _ms(p["tpot_s"]["p50"], 1)), ("TPOT p99", _ms(p["tpot_s"]["p99"], 1)),
            ("E2E mean", _ms(p["e2e_s"]["mean"], 1)),
            ("Throughput", f"{p['throughput_tok_s']:.0f} tok/s"),
            ("Requests/s", f"{p['throughput_req_s']:.2f} req/s")]
    if "goodput_req_s" in p:
        rows.append(("Goodput", f"{p['goodput_req_s']:.2f} req/s"))
    return rows


def _train_headline(p: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [("Iteration", f"{p['iteration_time_s']:.3f} s"),
            ("Tokens/s", f"{p['tokens_per_s']:,.0f}"),
            ("MFU", f"{p['mfu']:.1%}"),
            ("TFLOP/s per GPU", f"{p['tflops_per_gpu']:.1f}"),
            ("Memory per GPU", f"{p['memory_per_gpu_bytes'] / 1e9:.1f} GB of "
                               f"{p['capacity_bytes'] / 1e9:.0f}")]


_HEADLINES = {"infer": _infer_headline, "serve": _serve_headline, "train": _train_headline}


def headline(command: str, payload: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, formatted value) of the metrics that answer the question, most important first."""
    return _HEADLINES[command](payload)


def breakdown_frame(command: str, payload: Mapping[str, Any]) -> pd.DataFrame:
    """Where the time goes: infer per phase and kernel family; train per part of the
    iteration (the parts sum to it). Empty for serve, whose payload has no breakdown."""
    if command == "infer":
        rows = payload["breakdown"]["by_family"]
        frame = pd.DataFrame(rows, columns=["phase", "family", "total_s", "share"])
        return frame.assign(ms=frame["total_s"] * 1e3)[["phase", "family", "ms", "share"]]
    if command == "train":
        total = payload["iteration_time_s"]
        parts = {k.removesuffix("_s").replace("exposed_comm.", "exposed "): v
                 for k, v in iteration_parts(payload["breakdown"]).items() if v}
        return pd.DataFrame({"part": list(parts), "ms": [v * 1e3 for v in parts.values()],
                             "share": [v / total for v in parts.values()]})
    return pd.DataFrame(columns=["part", "ms", "share"])


def memory_frame(command: str, payload: Mapping[str, Any]) -> pd.DataFrame:
    """Memory per GPU by kind, in GB (empty for serve, which reports KV-cache use instead)."""
    if command == "infer":
        parts = {k.removesuffix("_bytes"): v for k, v in payload["memory_bytes"].items()
                 if k != "total_bytes"}
    elif command == "train":
        parts = dict(payload["memory"])
    else:
        parts = {}
    return pd.DataFrame({"kind": list(parts), "GB": [v / 1e9 for v in parts.values()]})


def latency_frame(payload: Mapping[str, Any]) -> pd.DataFrame:
    """A serving run's latency statistics in ms: one row per metric, mean/p50/p90/p99."""
    rows = {key.removesuffix("_s").upper(): [payload[key][q] * 1e3 for q in _PERCENTILES]
            for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queueing_s") if key in payload}
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(_PERCENTILES))


def cdf_frame(requests: pd.DataFrame, column: str) -> pd.DataFrame:
    """Empirical CDF of one per-request latency column: `ms` against `fraction` of requests
    at or below it (requests without a value, e.g. TPOT of one-token outputs, left out)."""
    values = pd.to_numeric(requests[column], errors="coerce").dropna().sort_values() * 1e3
    n = len(values)
    return pd.DataFrame({"ms": values.to_numpy(),
                         "fraction": [(i + 1) / n for i in range(n)]})


_SWEEP_METRICS = {
    "infer": (("TTFT (ms)", "ttft_s", 1e3), ("TPOT (ms)", "tpot_s", 1e3),
              ("E2E (ms)", "e2e_s", 1e3), ("throughput (tok/s)", "throughput_tok_s", 1),
              ("memory/GPU (GB)", "memory_bytes.total_bytes", 1e-9)),
    "serve": (("TTFT p50 (ms)", "ttft_s.p50", 1e3), ("TTFT p99 (ms)", "ttft_s.p99", 1e3),
              ("TPOT p50 (ms)", "tpot_s.p50", 1e3), ("TPOT p99 (ms)", "tpot_s.p99", 1e3),
              ("throughput (tok/s)", "throughput_tok_s", 1)),
    "train": (("iteration (s)", "iteration_time_s", 1), ("tokens/s", "tokens_per_s", 1),
              ("MFU (%)", "mfu", 100), ("memory/GPU (GB)", "memory_per_gpu_bytes", 1e-9)),
}


def _lookup(payload: Mapping[str, Any], path: str) -> Any:
    node: Any = payload
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def sweep_frame(command: str, axes: Sequence[str],
                results: Sequence[tuple[Mapping[str, Any], Mapping | None, str | None]]
                ) -> pd.DataFrame:
    """One row per sweep point: its axis values, the command's key metrics (None where the
    point failed) and the error message of a failed point."""
    rows = []
    for options, payload, error in results:
        row = {axis: options.get(axis) for axis in axes}
        for label, path, scale in _SWEEP_METRICS[command]:
            value = _lookup(payload, path) if payload else None
            row[label] = None if value is None else value * scale
        row["error"] = error or ""
        rows.append(row)
    return pd.DataFrame(rows)
