"""Fitting LinkFit terms on measured all-reduces (used by scripts/fit_collectives.py and by
the collective validation): pure functions of arrays, no store access."""

from __future__ import annotations

import numpy as np

from perfcast.comm._fits import LinkFit
from perfcast.errors import InputError

__all__ = ["fit_link", "fit_p2p"]


def _allreduce_s(params: np.ndarray, n: np.ndarray, m: np.ndarray, bandwidth_bps: float,
                 sizes: np.ndarray) -> np.ndarray:
    base, alpha, log_half, exponent, *ceiling = params
    fit = LinkFit("", base, alpha, tuple(sizes), tuple(ceiling), float(np.exp(log_half)),
                  exponent, float("inf"))
    traffic = 2 * (n - 1) / n * m  # Patarasuk & Yuan 2009: ring all-reduce bytes per GPU
    return base + 2 * (n - 1) * alpha + traffic / (bandwidth_bps * fit.efficiency(traffic, n))


def fit_link(link_kind: str, n: np.ndarray, m: np.ndarray, time_s: np.ndarray,
             bandwidth_bps: float, measured_device: str = "", source: str = "") -> LinkFit:
    """LinkFit from measured all-reduces (n GPUs, m bytes, seconds): least squares on log time
    (relative error) of t = base + 2(n-1) alpha + traffic / (bandwidth x eta(traffic, n)),
    traffic = 2(n-1)/n m. Exponent bounded to (0.1, 1] so time stays monotone in bytes."""
    from scipy.optimize import least_squares  # ~0.3 s to import: only when fitting

    n, m, t = (np.asarray(a, dtype=float) for a in (n, m, time_s))
    if len(t) < 8 or (n < 2).any() or (t <= 0).any():
        raise InputError("measurements", "need >= 8 all-reduces over >= 2 GPUs with "
                         "positive times", ">= 8 rows")
    sizes = np.unique(n)
    start = [float(t.min()) / 2, 1e-6, np.log(1e6), 0.5, *([0.5] * len(sizes))]
    lower = [0.0, 0.0, np.log(1e2), 0.1, *([1e-4] * len(sizes))]
    upper = [1e-3, 1e-4, np.log(1e11), 1.0, *([1.0] * len(sizes))]
    res = least_squares(lambda p: np.log(_allreduce_s(p, n, m, bandwidth_bps, sizes) / t),
                        start, bounds=(lower, upper), x_scale=[1e-6, 1e-7, 1, 0.1,
                                                               *([0.1] * len(sizes))])
    base, alpha, log_half, exponent, *ceiling = (float(v) for v in res.x)
    return LinkFit(kind=link_kind, base_s=base, alpha_s=alpha,
                   group_sizes=tuple(float(s) for s in sizes),
                   ceiling=tuple(ceiling), half_bytes=float(np.exp(log_half)),
                   exponent=exponent, max_bytes=float((2 * (n - 1) / n * m).max()),
                   measured_device=measured_device, source=source)


def fit_p2p(message_bytes: np.ndarray, time_s: np.ndarray) -> tuple[float, float]:
    """(latency_s, bandwidth_bps) of t = latency + bytes / bandwidth, least squares on
    relative error (each row divided by its time)."""
    m, t = np.asarray(message_bytes, dtype=float), np.asarray(time_s, dtype=float)
    design = np.column_stack([np.ones_like(m), m]) / t[:, None]
    latency, per_byte = np.linalg.lstsq(design, np.ones_like(t), rcond=None)[0]
    if per_byte <= 0:
        raise InputError("measurements", "time does not grow with bytes", "increasing rows")
    return max(float(latency), 0.0), float(1.0 / per_byte)
