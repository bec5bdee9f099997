"""Effects of running one training iteration on many ranks that a single-rank step does not
show: stragglers and jitter, exposed host time, checkpoint stalls.

The engine's iteration is every rank's *mean* step. Synchronous training waits for the
slowest rank at every gradient reduction, so with a per-rank, per-iteration relative
standard deviation `cv` of the compute time T_c the iteration takes, in expectation,
T + T_c cv E[max of R standard normals] (R the synchronising ranks: every GPU of the plan
meets in the gradient reduction). The max of R iid variables has CDF F^R (David and
Nagaraja, Order Statistics, 2003, eq. 2.1.1), so its q-quantile is Phi^-1(q^(1/R)) and its
mean the integral of that CDF, E[M] = int_0^inf (1 - Phi^R) - int_-inf^0 Phi^R, taken here by
the trapezoid rule on a fixed grid: deterministic, within 1e-6 of the exact value (Blom's
1958 plotting position, the usual closed form, is 4% high at R = 2).

Which terms are on by default: none. No published source gives a per-rank, per-iteration
CV of the step time that could be carried to other clusters (Sinha et al. SC'22,
https://arxiv.org/abs/2208.11035, report an 8% (max 22%) *range* of performance across
identical V100/MI60 GPUs; Golden et al. 2025, PRISM, https://arxiv.org/abs/2510.15596,
report 9% GPU-time variability at 64k GPUs: ranges, not standard deviations), and exposed
host, data-loader and checkpoint times depend on the run's own code and storage; each is
the user's number, 0 or off until given.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perfcast.errors import InputError, from_validation_error

__all__ = ["SCALE_PARTS", "ScaleEffects", "expected_max_normal", "max_normal_quantile",
           "scale_columns", "trainable_params"]

SCALE_PARTS = ("straggler_s", "host_s", "checkpoint_s")
_GRID = np.linspace(-12.0, 12.0, 24_001)  # standard-normal units; the max of 1e9 is ~6.1
_BISECT_STEPS = 80


class ScaleEffects(BaseModel):
    """What the ranks of a training job add to the engine's mean iteration. All off by
    default (module docstring: no transferable published values):

    - `rank_jitter_cv`: each rank's compute time per iteration varies with this relative
      standard deviation, independently across ranks and iterations (clock and thermal
      throttling, OS noise, uneven data); the iteration waits for the slowest rank.
    - `host_s_per_iteration`: CPU time per iteration the GPU waits for (Python, optimizer
      kernel launches, logging, loss synchronisation) that the step does not hide.
    - `dataloader_s_per_iteration`: exposed data-loading time (0: prefetched by workers).
    - `checkpoint_every_iterations` + `checkpoint_bandwidth_bps`: every that many
      iterations the model state (16-bit weights + optimizer state of the trainable
      parameters) is written at that aggregate storage bandwidth; the stall is amortised
      per iteration. `checkpoint_async`: only the GPU-to-host copy of each GPU's share
      stalls (over the device's PCIe link), unless the background write outlasts the
      interval, whose excess stalls the next checkpoint.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    rank_jitter_cv: float = Field(0.0, ge=0.0, le=1.0, description="per-rank, per-iteration "
                                  "relative std of the compute time")
    host_s_per_iteration: float = Field(0.0, ge=0.0, description="exposed host seconds")
    dataloader_s_per_iteration: float = Field(0.0, ge=0.0, description="exposed data-loading "
                                              "seconds (0: prefetched)")
    checkpoint_every_iterations: int | None = Field(None, gt=0, description="iterations "
                                                    "between checkpoints; None: none")
    checkpoint_bandwidth_bps: float | None = Field(None, gt=0, description="aggregate "
                                                   "storage write bandwidth, bytes/s")
    checkpoint_async: bool = Field(False, description="only the GPU-to-host copy stalls")

    def __init__(self, **data: Any):
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise from_validation_error(exc, default="scale") from None
        self._check()

    def _check(self) -> None:
        interval = self.checkpoint_every_iterations
        if interval is not None and self.checkpoint_bandwidth_bps is None:
            raise InputError("checkpoint_bandwidth_bps", "is needed to price a checkpoint "
                             f"every {interval} iterations", "a storage write bandwidth, "
                             "bytes/s")
        if interval is None and (self.checkpoint_bandwidth_bps is not None
                                 or self.checkpoint_async):
            field = ("checkpoint_async" if self.checkpoint_bandwidth_bps is None
                     else "checkpoint_bandwidth_bps")
            raise InputError(field, "only applies with checkpoint_every_iterations",
                             "checkpoint_every_iterations, or omit it")

    @property
    def off(self) -> bool:
        """Every term off: the engine's columns stand as they are."""
        return self == _OFF


_OFF = ScaleEffects()


def expected_max_normal(ranks: np.ndarray) -> np.ndarray:
    """E[max of R iid standard normals]: the integral of its CDF Phi^R (module docstring),
    once per distinct R; 0 for R = 1, non-decreasing in R."""
    from scipy.integrate import trapezoid  # scipy loads when a scale effect is priced
    from scipy.special import log_ndtr

    r = np.asarray(ranks, dtype=float)
    distinct, where = np.unique(r, return_inverse=True)
    cdf = np.exp(distinct[:, None] * log_ndtr(_GRID)[None, :])
    above = trapezoid(1.0 - cdf[:, _GRID >= 0], _GRID[_GRID >= 0], axis=1)
    below = trapezoid(cdf[:, _GRID <= 0], _GRID[_GRID <= 0], axis=1)
    mean = np.where(distinct > 1, np.maximum(above - below, 0.0), 0.0)  # R = 1: exactly 0
    return mean[where].reshape(r.shape)


def max_normal_quantile(q: float, ranks: np.ndarray) -> np.ndarray:
    """The q-quantile of the max of R iid standard normals: Phi^-1(q^(1/R)), exact."""
    from scipy.special import ndtri

    return ndtri(np.power(q, 1.0 / np.asarray(ranks, dtype=float)))


def _mixture_quantile(q: float, sigma: np.ndarray, ranks: np.ndarray, stall: np.ndarray,
                      share: np.ndarray) -> np.ndarray:
    """The q-quantile of the iteration's excess over its mean step: the slowest rank's
    excess (sigma x max of R normals), plus `stall` seconds on a `share` of iterations
    (the checkpoint ones). Bisection on the mixture's CDF, which is bracketed by the
    excess's own quantile and that plus the stall; deterministic."""
    from scipy.special import ndtr

    lo = sigma * max_normal_quantile(q, ranks)
    hi = lo + stall

    def cdf(x: np.ndarray) -> np.ndarray:
        def g(y):
            z = np.divide(y, sigma, out=np.where(y >= 0, np.inf, -np.inf), where=sigma > 0)
            return np.power(ndtr(z), ranks)
        return (1 - share) * g(x) + share * g(x - stall)

    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        below = cdf(mid) < q
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return hi


def trainable_params(job) -> float:
    """Parameters the job trains (and checkpoints): the LoRA adapters, else the model's."""
    from perfcast.ops._training import lora_params

    if job.lora_rank:
        return float(lora_params(job.model, job.lora_rank))
    return float(job.model.total_params())


def _checkpoint(jobs: list, iteration: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(stall seconds per checkpoint, share of iterations that checkpoint) per job."""
    from perfcast.train._memory import state_bytes_per_param

    stall, share = np.zeros(len(jobs)), np.zeros(len(jobs))
    for i, job in enumerate(jobs):
        s = job.scale
        if s.checkpoint_every_iterations is None:
            continue
        per_param = state_bytes_per_param(job.precision_or_default, job.memory_policy)
        state_bytes = trainable_params(job) * (per_param["gathered"] + per_param["optimizer"])
        write_s = state_bytes / s.checkpoint_bandwidth_bps
        if s.checkpoint_async:
            pcie = job.cluster.device.pcie_bandwidth_bps
            if pcie is None:
                raise InputError("checkpoint_async", f"{job.cluster.device.name} has no PCIe "
                                 "bandwidth in the catalog to price the GPU-to-host copy",
                                 "a synchronous checkpoint")
            copy_s = state_bytes / job.plan.num_gpus / pcie  # each GPU copies its share
            overrun = write_s - s.checkpoint_every_iterations * float(iteration[i])
            write_s = copy_s + max(overrun, 0.0)
        stall[i], share[i] = write_s, 1.0 / s.checkpoint_every_iterations
    return stall, share


def scale_columns(jobs: list, cols: dict[str, np.ndarray],
                  stack_host_s: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """`cols` (perfcast.train._engine.evaluate's, one entry per job) with each job's scale
    effects added: iteration_time_s becomes the expected iteration, and breakdown.straggler_s
    + host_s + checkpoint_s (amortised) keep the breakdown summing to it; host_s is the
    job's own exposed host time plus `stack_host_s` (an eager stack's host wait);
    iteration_p50_s / iteration_p99_s are percentiles over iterations of the slowest
    rank's time (checkpoint iterations carry their whole stall). Jobs with every term off
    keep their columns unchanged (p50 = p99 = the iteration)."""
    out = dict(cols)
    base = cols["iteration_time_s"]
    zeros = np.zeros(len(jobs))
    out.update({f"breakdown.{k}": zeros for k in SCALE_PARTS})
    out["iteration_p50_s"], out["iteration_p99_s"] = base, base
    stack_host = np.zeros(len(jobs)) if stack_host_s is None else np.asarray(stack_host_s)
    if all(job.scale.off for job in jobs) and not stack_host.any():
        return out
    ranks = np.array([job.plan.num_gpus for job in jobs], dtype=float)
    cv = np.array([job.scale.rank_jitter_cv for job in jobs])
    sigma = cv * cols["breakdown.compute_s"]
    straggler = sigma * expected_max_normal(ranks)
    host = stack_host + np.array([j.scale.host_s_per_iteration
                                  + j.scale.dataloader_s_per_iteration for j in jobs])
    stall, share = _checkpoint(jobs, base + straggler + host)
    mean = base + straggler + host + stall * share
    steady = base + host
    out.update({"iteration_time_s": mean, "breakdown.straggler_s": straggler,
                "breakdown.host_s": host, "breakdown.checkpoint_s": stall * share,
                "iteration_p50_s": steady + _mixture_quantile(0.5, sigma, ranks, stall, share),
                "iteration_p99_s": steady + _mixture_quantile(0.99, sigma, ranks, stall,
                                                              share)})
    return out
