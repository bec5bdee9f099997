"""What a simulation measured: per-request records, per-replica step statistics, and the
aggregate view (latency percentiles, throughput, goodput, KV use), plus explicit writers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.errors import check_output_file

__all__ = ["ServeResult", "StepLog"]

_TIMELINE = ("time_s", "duration_s", "batch_size", "num_tokens", "kv_utilisation")


class StepLog:
    """Accumulators of one replica: busy time, time-weighted KV utilisation and
    fragmentation, inter-token gaps (single values and weighted runs), optional timeline."""

    __slots__ = ("busy_s", "steps", "util_area", "frag_area", "frag_s", "itl_single",
                 "itl_runs", "timeline", "spec_steps", "spec_tokens")

    def __init__(self, timeline: bool):
        self.busy_s = self.util_area = self.frag_area = self.frag_s = 0.0
        self.steps = self.spec_steps = 0
        self.spec_tokens = 0.0  # tokens per member gained over the speculative steps
        self.itl_single: list[float] = []
        self.itl_runs: list[tuple[np.ndarray, float | np.ndarray]] = []  # values, weight(s)
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

    def add_one(self, duration_s: float, util: float, fill: float) -> None:
        """One step without a timeline (the scalar fast path of `add`)."""
        self.steps += 1
        self.busy_s += duration_s
        self.util_area += util * duration_s
        if util > 0:
            self.frag_area += (1.0 - fill) * duration_s
            self.frag_s += duration_s

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
