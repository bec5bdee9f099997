"""What a simulation measured: per-request records, per-replica step statistics, and the
aggregate view (latency percentiles, throughput, goodput, KV use), plus explicit writers."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.errors import check_output_file
from perfcast.serve._kv import MemoryPlan

__all__ = ["ServeResult", "StepLog", "WeightedHistogram"]

_TIMELINE = ("time_s", "duration_s", "batch_size", "num_tokens", "kv_utilisation")


BIN_BITS = 16  # mantissa bits kept per histogram bin: bins 2^-16 (0.0015%) wide
FLUSH_VALUES = 1 << 18  # buffered values folded into the histogram at a time


class WeightedHistogram:
    """Non-negative weighted values (inter-token gaps) in bounded memory: binned by their
    leading 1 + BIN_BITS significant bits, so a bin spans a relative width of 2^-BIN_BITS.
    A bin keeps its total weight and weighted sum, so the mean is exact (up to rounding) and
    a percentile is the weighted mean of the bin it falls in (within 0.0015% of the exact
    one). Values are buffered and folded in FLUSH_VALUES at a time, so memory depends on
    the spread of the values, not on how many there are."""

    __slots__ = ("single", "runs", "buffered", "keys", "sums", "weights")

    def __init__(self):
        self.single: list[float] = []  # values of weight 1
        self.runs: list[tuple[np.ndarray, float | np.ndarray]] = []  # values, weight(s)
        self.buffered = 0
        self.keys = np.zeros(0, dtype=np.int64)
        self.sums = self.weights = np.zeros(0)

    def add(self, values: np.ndarray, weight: float | np.ndarray) -> None:
        """Values sharing one weight, or one weight each."""
        self.runs.append((values, weight))
        self.buffered += len(values)
        if self.buffered + len(self.single) >= FLUSH_VALUES:
            self.flush()

    def flush(self) -> None:
        """Fold the buffered values into the bins."""
        if not self.buffered and not self.single:
            return
        runs = self.runs
        values = np.fromiter(chain(self.single, *(v for v, _ in runs)), dtype=float)
        if all(np.isscalar(w) for _, w in runs):  # the common case: one weight per run
            weights = np.repeat(np.array([1.0, *(w for _, w in runs)], dtype=float),
                                [len(self.single), *(len(v) for v, _ in runs)])
        else:
            weights = np.concatenate([np.ones(len(self.single)), *(
                np.broadcast_to(np.asarray(w, dtype=float), (len(v),)) for v, w in runs)])
        self.single.clear()
        runs.clear()
        self.buffered = 0
        keys = values.view(np.int64) >> (52 - BIN_BITS)  # monotone in a value >= 0
        self.keys, self.sums, self.weights = _fold(
            np.concatenate([self.keys, keys]), np.concatenate([self.sums, values * weights]),
            np.concatenate([self.weights, weights]))

    @staticmethod
    def merged(parts: list[WeightedHistogram]) -> tuple[np.ndarray, np.ndarray]:
        """(values, weights) of the bins of all `parts`, in increasing value: a bin's value is
        its weighted mean."""
        for part in parts:
            part.flush()
        _, sums, weights = _fold(*(np.concatenate([getattr(p, f) for p in parts])
                                   for f in ("keys", "sums", "weights")))
        held = weights > 0
        return sums[held] / weights[held], weights[held]


def _fold(keys: np.ndarray, sums: np.ndarray,
          weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Entries with the same key summed, in key order."""
    unique, inverse = np.unique(keys, return_inverse=True)
    return (unique, np.bincount(inverse, sums, len(unique)),
            np.bincount(inverse, weights, len(unique)))


class StepLog:
    """Accumulators of one replica: busy time, time-weighted KV utilisation and
    fragmentation, inter-token gaps (`itl`, a histogram), optional timeline."""

    __slots__ = ("busy_s", "steps", "util_area", "frag_area", "frag_s", "itl", "timeline",
                 "spec_steps", "spec_tokens")

    def __init__(self, timeline: bool):
        self.busy_s = self.util_area = self.frag_area = self.frag_s = 0.0
        self.steps = self.spec_steps = 0
        self.spec_tokens = 0.0  # tokens per member gained over the speculative steps
        self.itl = WeightedHistogram()
        self.timeline: list[tuple] | None = [] if timeline else None

    def add(self, start_s, duration_s, util, fill, batch: int, tokens) -> None:
        """Steps sharing a batch size: start, duration, KV utilisation and fill (tokens over
        allocated slots) per step."""
        self.steps += len(duration_s)
        self.busy_s += float(duration_s.sum())
        self.util_area += float(util @ duration_s)
        held = util > 0
        self.frag_area += float((1.0 - fill[held]) @ duration_s[held])
        self.frag_s += float(duration_s[held].sum())
        if self.timeline is not None:
            self.timeline.append((start_s, duration_s, batch, tokens, util))

    def frame(self) -> pd.DataFrame:
        rows = self.timeline or []
        cols = [np.concatenate([np.broadcast_to(r[i], r[0].shape) for r in rows])
                if rows else np.array([]) for i in range(len(_TIMELINE))]
        return pd.DataFrame(dict(zip(_TIMELINE, cols, strict=True)))


def _stats(values: np.ndarray, weights: np.ndarray | None = None) -> dict[str, float]:
    if not len(values):
        return {k: float("nan") for k in ("mean", "p50", "p90", "p99")}
    if weights is None:
        p = np.percentile(values, [50, 90, 99])
        return {"mean": float(values.mean()), "p50": float(p[0]), "p90": float(p[1]),
                "p99": float(p[2])}
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cum = np.cumsum(w) / w.sum()
    pick = [float(v[min(np.searchsorted(cum, q), len(v) - 1)]) for q in (0.5, 0.9, 0.99)]
    return {"mean": float(v @ w / w.sum()), "p50": pick[0], "p90": pick[1], "p99": pick[2]}


@dataclass(frozen=True, eq=False)
class ServeResult:
    """`requests`: one row per request (id, replica, arrival_s, first_token_s, completion_s,
    prompt_tokens, output_tokens, queueing_delay_s, preemptions, restarts, ttft_s, tpot_s,
    e2e_s, prefix_hit_tokens). `timelines`: per replica step table (time_s, duration_s,
    batch_size, num_tokens, kv_utilisation) when the simulation was asked for it, else None.
    With prefix caching, the summary's `prefix_hit_ratio` is the share of admitted prompt
    tokens (restarts included) whose KV was found cached; with speculative decoding,
    `spec_tokens_per_step` (tokens a sequence gained per verification step, as simulated)
    sits beside `spec_expected_tokens_per_step` (the closed form)."""

    requests: pd.DataFrame
    replicas: pd.DataFrame
    itl_values_s: np.ndarray
    itl_weights: np.ndarray
    timelines: dict[int, pd.DataFrame] | None
    kv_blocks: int
    prefix_caching: bool = False
    spec_expected_tokens: float | None = None  # closed-form mean yield per speculative step
    memory: MemoryPlan | None = None  # each replica's GPU memory plan (serve._kv)

    @property
    def duration_s(self) -> float:
        """From the first arrival to the last completion."""
        r = self.requests
        return float(r["completion_s"].max() - r["arrival_s"].min())

    def goodput_req_s(self, ttft_slo_s: float, tpot_slo_s: float) -> float:
        """Requests per second that met both SLOs (TTFT and TPOT; one-token requests need
        only the TTFT one)."""
        r = self.requests
        ok = (r["ttft_s"] <= ttft_slo_s) & ~(r["tpot_s"] > tpot_slo_s)
        return float(ok.sum()) / self.duration_s

    def summary(self, ttft_slo_s: float | None = None, tpot_slo_s: float | None = None) -> dict:
        """Aggregate metrics; `goodput_req_s` too when both SLOs are given."""
        r, dur = self.requests, self.duration_s
        tpot = r["tpot_s"].dropna().to_numpy()
        rep = self.replicas
        out = {"num_requests": len(r),
               "ttft_s": _stats(r["ttft_s"].to_numpy()), "tpot_s": _stats(tpot),
               "e2e_s": _stats(r["e2e_s"].to_numpy()),
               "itl_s": _stats(self.itl_values_s, self.itl_weights),
               "queueing_s": _stats(r["queueing_delay_s"].to_numpy()),
               "throughput_req_s": len(r) / dur,
               "throughput_tok_s": float(r["output_tokens"].sum()) / dur,
               "preemptions": int(r["preemptions"].sum()), "restarts": int(r["restarts"].sum()),
               "kv_utilisation_mean": float((rep["util_area"] / dur).mean()),
               "kv_fragmentation_mean": float(rep["frag_area"].sum()
                                               / max(rep["frag_s"].sum(), 1e-300)),
               "duration_s": dur, "steps": int(rep["steps"].sum()), "kv_blocks": self.kv_blocks}
        if ttft_slo_s is not None and tpot_slo_s is not None:
            out["goodput_req_s"] = self.goodput_req_s(ttft_slo_s, tpot_slo_s)
        if self.spec_expected_tokens is not None:
            steps = float(rep["spec_steps"].sum())
            out["spec_tokens_per_step"] = float(rep["spec_tokens"].sum()) / max(steps, 1.0)
            out["spec_expected_tokens_per_step"] = self.spec_expected_tokens
        if self.prefix_caching:
            looked = float(rep["prefix_lookup_tokens"].sum())
            out["prefix_hit_ratio"] = float(r["prefix_hit_tokens"].sum()) / max(looked, 1.0)
        return out

    def to_csv(self, path: str | Path) -> Path:
        """Write the per-request table; refuses to overwrite an existing file."""
        return _write(path, lambda p: self.requests.to_csv(p, index=False))

    def to_parquet(self, path: str | Path) -> Path:
        return _write(path, lambda p: self.requests.to_parquet(p, index=False))

    def chrome_trace(self) -> dict:
        """Perfetto / Chrome trace-event JSON: each request an async span (queued, then
        running from its first token); each replica's steps as complete events."""
        from perfcast.serve._trace import serve_trace
        return serve_trace(self)


def _write(path: str | Path, write) -> Path:
    path = check_output_file(path, "path")
    write(path)
    return path
