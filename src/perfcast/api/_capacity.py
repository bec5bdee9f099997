"""`capacity`: the cheapest GPU type x TP x replicas meeting P99 TTFT/TPOT SLOs at a target
QPS (scenario X15).

Every probe of every candidate is a `ServeRequest` run through `run`, exactly what
`perfcast serve --json` reports for it; the search itself (QPS ladder, bisection, pricing,
Pareto fronts) is `perfcast.api._capacity_search`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import Field, ValidationError, field_validator

from perfcast import __version__
from perfcast.api._assign import parse_assignment
from perfcast.api._backends import choose_backend
from perfcast.api._base import Group, Request, register, run
from perfcast.api._capacity_search import Slo, capacity_search
from perfcast.api._prices import gpu_prices
from perfcast.api._serve import ServeRequest
from perfcast.api._units import MAX_REQUESTS, TPOT_PLAIN_MAX_S, TTFT_PLAIN_MAX_S, parse_seconds
from perfcast.errors import InputError, from_validation_error
from perfcast.progress import claimed
from perfcast.specs import get_device

__all__ = ["CapacityCandidates", "CapacityProbes", "CapacityRequest", "CapacityResult",
           "CapacityTarget", "Parallelism", "ResolvedCapacity",
           "serve_payload"]

# Serve options capacity sets itself, per candidate and probe: not for `--set`.
CAPACITY_OWN = {"model", "gpu", "cluster", "tp", "qps", "replicas", "num_requests", "seed"}


class CapacityTarget(Group):
    """The load to sustain and the latency limits, on the P99 over the simulated requests."""

    qps: float = Field(10.0, gt=0.0, allow_inf_nan=False, description="Target arrival rate, "
                       "requests/s.")
    ttft_p99_slo: float = Field(1.0, description="P99 TTFT limit: 1s, 800ms (a bare number "
                                "is seconds).")
    tpot_p99_slo: float = Field(0.05, description="P99 TPOT limit: 50ms, 0.05s (a bare number "
                                "is seconds).")

    @field_validator("ttft_p99_slo", "tpot_p99_slo", mode="before")
    @classmethod
    def _seconds(cls, value: Any, info) -> float:
        """`500ms`, `0.5s` or a bare number of seconds (refused when only ms make sense)."""
        limit = TTFT_PLAIN_MAX_S if info.field_name == "ttft_p99_slo" else TPOT_PLAIN_MAX_S
        if value is None:
            raise InputError(info.field_name, "capacity needs both SLOs", "e.g. 500ms")
        return parse_seconds(value, info.field_name, limit)

    def slo(self) -> Slo:
        return Slo(self.ttft_p99_slo, self.tpot_p99_slo)


class CapacityCandidates(Group):
    """GPU types and TP degrees to try, and what each GPU costs."""

    gpu: str = Field("h100-sxm,a100-sxm4-80gb", description="Candidate GPUs, comma-separated "
                     "catalog names.")
    tp: str = Field("2,4,8", description="Candidate TP degrees per replica.")
    prices: Path | None = Field(None, description="JSON price file overriding the shipped "
                                "list prices per GPU.")

    def pairs(self) -> list[tuple[str, int]]:
        """Every (canonical GPU name, TP) pair, each once, in the order given."""
        gpus = [get_device(name.strip()).name for name in self.gpu.split(",") if name.strip()]
        try:
            tps = [int(t) for t in self.tp.split(",") if t.strip()]
        except ValueError:
            raise InputError("tp", f"not a list of integers: {self.tp!r}", "e.g. 2,4,8"
                             ) from None
        if not gpus or not tps or min(tps) < 1:
            raise InputError("gpu" if not gpus else "tp", "empty or invalid list",
                             "comma-separated GPU names and TP degrees >= 1")
        return [(g, t) for g in dict.fromkeys(gpus) for t in dict.fromkeys(tps)]


class CapacityProbes(Group):
    """How each probe simulates: requests, seed, QPS resolution, and other serve options."""

    num_requests: int = Field(100, ge=1, le=MAX_REQUESTS, description="Requests per probe "
                              "simulation.")
    seed: int = Field(0, ge=0, description="Workload seed of every probe.")
    qps_step: float = Field(0.05, gt=0.0, le=1.0, description="Relative resolution of the "
                            "max-QPS bisection.")
    sets: list[str] | None = Field(None, alias="set", description="Other `perfcast serve` "
                                   "options for every probe, NAME=VALUE.")

    def base(self, model: str) -> dict[str, Any]:
        """The serve options every probe shares (candidates add gpu, tp and qps)."""
        extra = dict(parse_assignment(text, "set", many=False) for text in self.sets or [])
        for name in extra:
            ServeRequest.check_option(name, f"set.{name}")
        clash = sorted(CAPACITY_OWN & set(extra))
        if clash:
            raise InputError(f"set.{clash[0]}", "capacity sets this option itself",
                             "other `perfcast serve` options")
        base = {"model": model, "num_requests": self.num_requests, "seed": self.seed, **extra}
        _check_probe(base)
        return base


def _check_probe(base: dict[str, Any]) -> None:
    """The serve options every probe shares make a serve request (checked once, up front,
    naming the `--set` option), so a bad value is an error, not every candidate failing."""
    try:
        probe = ServeRequest.from_options(base)
        probe.workload.token_lengths()
        probe.speculative.rates()
    except InputError as exc:
        field = f"set.{exc.field}" if exc.field in base and exc.field != "model" else exc.field
        raise InputError(field, exc.problem, exc.allowed) from None


class Parallelism(Group):
    """Where independent runs go: worker processes here, or a Ray cluster."""

    workers: int | None = Field(None, ge=1, le=4096, description="Worker processes (default: "
                                "the CPU count; 1 runs in this process).")
    ray: bool = Field(False, description="Run on Ray (also when RAY_ADDRESS is set).")


class CapacityRequest(Request):
    """Cheapest GPU type x TP x replicas meeting P99 TTFT/TPOT SLOs at a target QPS."""

    command = "capacity"
    model: str = Field("llama-3-70b", description="Catalog model name or HF id.")
    target: CapacityTarget = CapacityTarget()
    candidates: CapacityCandidates = CapacityCandidates()
    probes: CapacityProbes = CapacityProbes()
    parallelism: Parallelism = Parallelism()


@dataclass(frozen=True)
class ResolvedCapacity:
    request: CapacityRequest
    base: dict[str, Any]
    candidates: list[tuple[str, int]]
    slo: Slo
    prices: dict[str, dict[str, Any]]
    backend: str


def resolve_capacity(request: CapacityRequest) -> ResolvedCapacity:
    base = request.probes.base(request.model)
    candidates = request.candidates.pairs()
    slo = request.target.slo()
    prices = gpu_prices(request.candidates.prices)
    return ResolvedCapacity(request, base, candidates, slo, prices,
                            choose_backend(request.parallelism.ray))


def serve_payload(point: Mapping[str, Any]) -> dict[str, Any]:
    """One probe: the `perfcast serve --json` payload of these serve options. Module-level,
    so process-pool and Ray workers load it by reference."""
    try:
        return run(ServeRequest.from_options(point)).payload()
    except ValidationError as exc:
        raise from_validation_error(exc, default="serve") from None


@dataclass(frozen=True)
class CapacityResult:
    """`search`: the target, SLO, candidates (each searched and priced), the chosen one,
    the Pareto fronts and the prices used."""

    request: CapacityRequest
    search: dict[str, Any]

    @property
    def chosen(self) -> dict[str, Any] | None:
        return self.search["chosen"]

    @property
    def candidates(self) -> pd.DataFrame:
        """One row per (gpu, tp) candidate."""
        return pd.DataFrame(self.search["candidates"])

    def payload(self) -> dict[str, Any]:
        r = self.request
        return {"perfcast_version": __version__, "model": r.model,
                "num_requests": r.probes.num_requests, "seed": r.probes.seed, **self.search}


def execute_capacity(r: ResolvedCapacity) -> CapacityResult:
    """The search; progress (`perfcast.progress`) counts candidates searched, of all."""
    t, p = r.request.target, r.request
    with claimed() as progress:
        search = capacity_search(serve_payload, r.base, r.candidates, t.qps, r.slo, r.prices,
                                 qps_step=p.probes.qps_step, backend=r.backend,
                                 workers=p.parallelism.workers, progress=progress)
    _check_some_ran(search["candidates"])
    return CapacityResult(r.request, search)


def _check_some_ran(rows: list[dict[str, Any]]) -> None:
    """Every candidate refused (no probe could run) is an input error, not 'no candidate
    meets the SLOs': nothing was forecast."""
    if rows and all(row["status"] == "error" for row in rows):
        reasons = "; ".join(f"{row['gpu']} TP{row['tp']}: {row['reason']}" for row in rows)
        raise InputError("tp", f"no candidate could be simulated ({reasons})",
                         "GPUs and TP degrees that hold the model, and valid --set options")


register(CapacityRequest, resolve_capacity, execute_capacity)
