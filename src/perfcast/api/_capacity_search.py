"""Capacity search: the cheapest deployment (GPU type x TP x replicas) meeting latency SLOs.

For each (gpu, tp) candidate, the most QPS one replica sustains with P99 TTFT and P99 TPOT
under their limits is found by bisection over a geometric ladder of rates ending at the
target (each probe one serving simulation, same seed and requests: deterministic). Replicas
= ceil(target / that rate); the deployment is then simulated once more per replica at
target / replicas for its latencies. Cost: replicas x tp x the GPU's hourly price, and per
million output tokens at the target rate. Replicas are assumed independent (a router that
splits the stream evenly), so one replica's simulation stands for all.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pandas as pd

from perfcast.api._backends import imap_unordered
from perfcast.errors import InputError
from perfcast.progress import ProgressFn
from perfcast.report import pareto_front

__all__ = ["Slo", "bisect_max", "capacity_search", "price_candidates",
           "qps_ladder", "search_candidate"]

PointFn = Callable[[dict[str, Any]], Mapping[str, Any]]
SECONDS_PER_HOUR = 3600.0
MAX_EXTRA_REPLICAS = 4  # if the operating point misses the SLO (noise), add up to this many


@dataclass(frozen=True)
class Slo:
    """Latency limits in seconds, on the P99 over the simulated requests."""

    ttft_p99_s: float
    tpot_p99_s: float

    def __post_init__(self):
        for name in ("ttft_p99_s", "tpot_p99_s"):
            value = getattr(self, name)
            if not value > 0:
                raise InputError(name, f"{value!r} is not a latency limit", "seconds > 0")

    def met(self, ttft_p99_s: float, tpot_p99_s: float) -> bool:
        return ttft_p99_s <= self.ttft_p99_s and tpot_p99_s <= self.tpot_p99_s


def qps_ladder(target_qps: float, step: float = 0.05, floor: float = 1 / 16) -> list[float]:
    """Rates target / (1 + step)^k, ascending, from about floor x target up to the target.

    The floor bounds the search (a candidate needing more than 1/floor replicas is reported
    as missing the SLO) and with it the probes: 58 rungs at the defaults, so the bisection
    takes at most 6 simulations (plus the target first and the operating point last)."""
    if not target_qps > 0:
        raise InputError("qps", f"{target_qps!r} is not a rate", "requests/s > 0")
    if not 0 < step <= 1:
        raise InputError("qps_step", f"{step!r} is not a relative step", "0 < step <= 1")
    rungs = math.ceil(math.log(1 / floor) / math.log1p(step))
    return [float(f"{target_qps / (1 + step) ** k:.6g}") for k in range(rungs, -1, -1)]


def bisect_max(passes: Callable[[int], bool], count: int) -> tuple[int, int]:
    """(largest i < count with passes(i), probes used) for a monotone predicate (true up to
    a threshold, false after); -1 when none passes. ceil(log2(count + 1)) probes at most."""
    low, high, probes = -1, count, 0
    while high - low > 1:
        mid = (low + high) // 2
        probes += 1
        if passes(mid):
            low = mid
        else:
            high = mid
    return low, probes


def _p99(payload: Mapping[str, Any], metric: str) -> float:
    try:
        return float(payload[metric]["p99"])
    except (KeyError, TypeError, ValueError):
        raise InputError("command", f"the point function's payload has no {metric}.p99",
                         "a `perfcast serve --json` payload") from None


def _probe(point_fn: PointFn, base: Mapping[str, Any], qps: float) -> dict[str, Any]:
    payload = point_fn({**base, "qps": qps})
    tok = float(payload.get("throughput_tok_s", 0.0))
    req = float(payload.get("throughput_req_s", 0.0))
    return {"qps_per_replica": qps, "ttft_p99_s": _p99(payload, "ttft_s"),
            "tpot_p99_s": _p99(payload, "tpot_s"),
            "output_tokens_per_request": tok / req if req > 0 else 0.0}


def search_candidate(point_fn: PointFn, base: Mapping[str, Any], slo: Slo,
                     ladder: Sequence[float], candidate: tuple[str, int]) -> dict[str, Any]:
    """One (gpu, tp): its max QPS per replica under the SLO, replicas, and latencies there.

    status: ok; slo-unmet (missed even at the ladder's lowest rate); error (the point
    function refused it, e.g. the model does not fit: `reason` says why).
    """
    gpu, tp = candidate
    row: dict[str, Any] = {"gpu": gpu, "tp": tp, "status": "ok", "reason": None}
    point = {**base, "gpu": gpu, "tp": tp}
    seen: dict[float, dict[str, Any] | None] = {}  # None: the probe raised

    def probe(qps: float) -> dict[str, Any]:
        if qps not in seen:
            seen[qps] = None
            seen[qps] = _probe(point_fn, point, qps)
        return seen[qps]

    def met(i: int) -> bool:
        at = probe(ladder[i])
        return slo.met(at["ttft_p99_s"], at["tpot_p99_s"])

    target, top = ladder[-1], len(ladder) - 1
    try:  # the target itself first: a replica that sustains it needs no bisection
        best = top if met(top) else bisect_max(met, top)[0]
        if best < 0:
            return {**row, "status": "slo-unmet", "probes": len(seen),
                    "reason": f"SLO missed even at {ladder[0]:g} req/s per replica "
                              f"(over {round(target / ladder[0])} replicas)"}
        fewest = math.ceil(target / ladder[best] - 1e-9)
        for replicas in range(fewest, fewest + MAX_EXTRA_REPLICAS + 1):
            at = probe(float(f"{target / replicas:.6g}"))
            if slo.met(at["ttft_p99_s"], at["tpot_p99_s"]):
                break
        else:
            return {**row, "status": "slo-unmet", "probes": len(seen),
                    "reason": "SLO missed at the operating rate (latency not monotone in QPS)"}
    except InputError as exc:
        return {**row, "status": "error", "probes": len(seen), "reason": str(exc)}
    return {**row, "config": f"{replicas} x TP{tp} {gpu}", "max_qps_per_replica": ladder[best],
            "max_qps_capped": best == len(ladder) - 1, "probes": len(seen), "replicas": replicas,
            "gpus": replicas * tp, **at}


def price_candidates(rows: Sequence[Mapping[str, Any]], prices: Mapping[str, Mapping[str, Any]],
                     target_qps: float) -> list[dict[str, Any]]:
    """Hourly cost and cost per million output tokens (at the target rate) of each row."""
    priced = []
    for row in rows:
        row = dict(row)
        if row["status"] == "ok":
            per_gpu = prices[row["gpu"]]["usd_per_gpu_hour"]
            row["usd_per_gpu_hour"] = per_gpu
            row["usd_per_hour"] = row["gpus"] * per_gpu
            tokens_per_hour = target_qps * row["output_tokens_per_request"] * SECONDS_PER_HOUR
            row["usd_per_million_output_tokens"] = (
                row["usd_per_hour"] / (tokens_per_hour / 1e6) if tokens_per_hour else math.inf)
        priced.append(row)
    return priced


def _front(rows: Sequence[Mapping[str, Any]], cost: str, latency: str) -> list[int]:
    """Indices of the feasible rows on the cost-latency Pareto front (report.pareto_front's
    rule: both minimised), by ascending cost."""
    ok = [i for i, row in enumerate(rows) if row["status"] == "ok"]
    table = pd.DataFrame([{cost: rows[i][cost], latency: rows[i][latency]} for i in ok],
                         index=ok, columns=[cost, latency])
    return [int(i) for i in pareto_front(table, cost, latency).index]


def _cheapest(rows: Sequence[Mapping[str, Any]]) -> int | None:
    ok = [i for i, row in enumerate(rows) if row["status"] == "ok"]
    if not ok:
        return None
    return min(ok, key=lambda i: (rows[i]["usd_per_hour"], rows[i]["gpus"],
                                  rows[i]["tpot_p99_s"], rows[i]["ttft_p99_s"], i))


def capacity_search(point_fn: PointFn, base: Mapping[str, Any],
                    candidates: Sequence[tuple[str, int]], target_qps: float, slo: Slo,
                    prices: Mapping[str, Mapping[str, Any]], qps_step: float = 0.05,
                    backend: str = "local", workers: int | None = None,
                    progress: ProgressFn | None = None) -> dict[str, Any]:
    """Search every candidate (in parallel), price them, pick the cheapest, and give the
    Pareto fronts of hourly cost vs P99 TTFT and vs P99 TPOT (indices into candidates).
    `progress(done, total)` is called as each candidate's search finishes."""
    missing = sorted({gpu for gpu, _ in candidates} - set(prices))
    if missing:
        raise InputError("gpu", f"no price for {missing[0]}", sorted(prices))
    ladder = qps_ladder(target_qps, qps_step)
    search = partial(search_candidate, point_fn, dict(base), slo, ladder)
    found = {}
    for row in imap_unordered(search, list(candidates), backend, workers):
        found[(row["gpu"], row["tp"])] = row
        if progress is not None:
            progress(len(found), len(candidates))
    rows = price_candidates([found[tuple(c)] for c in candidates], prices, target_qps)
    chosen = _cheapest(rows)
    return {"target_qps": target_qps,
            "slo": {"ttft_p99_s": slo.ttft_p99_s, "tpot_p99_s": slo.tpot_p99_s},
            "qps_step": qps_step, "chosen": None if chosen is None else rows[chosen],
            "candidates": rows,
            "pareto": {"ttft": _front(rows, "usd_per_hour", "ttft_p99_s"),
                       "tpot": _front(rows, "usd_per_hour", "tpot_p99_s")},
            "prices": {gpu: dict(prices[gpu]) for gpu in sorted({g for g, _ in candidates})}}
