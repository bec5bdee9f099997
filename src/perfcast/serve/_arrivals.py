"""Request arrival times (seconds from the start of a run) for open-loop workloads.

Pure functions of their arguments and a `numpy.random.Generator`, so a seed fixes the
sequence bit for bit. Times are float64, non-decreasing and start at 0 or later.
"""

from __future__ import annotations

import math

import numpy as np

from perfcast.errors import InputError

__all__ = ["closed_loop_arrivals", "gamma_arrivals", "poisson_arrivals", "replay_arrivals"]


def _count(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise InputError("num_requests", f"must be an integer >= 1, got {n!r}", ">= 1")
    return int(n)


def positive(field: str, value, allowed: str = "> 0") -> float:
    """`value` as a finite float > 0, else an InputError naming `field`."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(field, f"must be a number, got {value!r}", allowed) from None
    if not math.isfinite(v) or v <= 0:
        raise InputError(field, f"must be finite and > 0, got {value!r}", allowed)
    return v


def poisson_arrivals(n: int, qps: float, rng: np.random.Generator) -> np.ndarray:
    """A Poisson process at `qps` requests/s: exponential gaps with mean 1/qps."""
    n, rate = _count(n), positive("qps", qps)
    return np.cumsum(rng.exponential(1.0 / rate, size=n))


def gamma_arrivals(n: int, qps: float, cv: float, rng: np.random.Generator) -> np.ndarray:
    """A bursty renewal process: gamma gaps with mean 1/qps and coefficient of variation `cv`
    (shape 1/cv², scale cv²/qps). cv = 1 is Poisson; cv > 1 clusters requests in bursts."""
    n, rate, c = _count(n), positive("qps", qps), positive("cv", cv)
    shape = 1.0 / (c * c)
    return np.cumsum(rng.gamma(shape, 1.0 / (rate * shape), size=n))


def replay_arrivals(times_s: np.ndarray, n: int, time_scale: float = 1.0) -> np.ndarray:
    """The first `n` arrival times of a recorded trace, shifted to start at 0 and multiplied
    by `time_scale` (< 1 replays faster). Past the trace's end it repeats, each repetition
    starting one mean gap after the previous one ends."""
    n, scale = _count(n), positive("time_scale", time_scale)
    t = np.asarray(times_s, dtype=np.float64)
    if t.ndim != 1 or len(t) == 0 or not np.isfinite(t).all() or (np.diff(t) < 0).any():
        raise InputError("arrival_s", "must be a non-empty, finite, non-decreasing column")
    t = t - t[0]
    period = t[-1] + (t[-1] / (len(t) - 1) if len(t) > 1 else 1.0)
    reps = -(-n // len(t))
    out = (t[None, :] + period * np.arange(reps)[:, None]).ravel()[:n]
    return out * scale


def closed_loop_arrivals(n: int) -> np.ndarray:
    """All zeros: in a closed loop a request is sent when an earlier one finishes, so the
    engine (not the workload) decides when each arrives."""
    return np.zeros(_count(n), dtype=np.float64)


def rate_scale(times_s: np.ndarray, qps: float) -> float:
    """The `time_scale` that makes replayed `times_s` average `qps` requests/s."""
    rate = positive("qps", qps)
    if len(times_s) < 2:  # one request: no gap to rescale
        return 1.0
    span = float(times_s[-1] - times_s[0])
    if span <= 0:
        raise InputError("qps", "the trace's arrivals span no time, so they cannot be "
                         "rescaled to a rate", "leave qps unset for this trace")
    return (len(times_s) - 1) / span / rate
