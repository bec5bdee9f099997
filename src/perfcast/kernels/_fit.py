"""Least-squares fits of the physical kernel model: a family's shared (cross-generation)
parameters, or one device's own refit anchored on them (target-measured tier)."""

from __future__ import annotations

import statistics

import numpy as np

from perfcast.kernels._physics import FamilyParams, Prepared, evaluate

__all__ = ["fit_family"]

NO_LAUNCH_TIMINGS = ("cuda_graph", "kineto")  # timing methods that exclude launch cost
_F_SCALE = 0.1  # soft-L1 knee in log-error units: rows off by more than ~10% count linearly


def _weights(groups: np.ndarray) -> np.ndarray:
    """Each group (device) carries the same total weight, whatever its row count."""
    _, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    return 1.0 / np.sqrt(counts[inverse])


def _layout(prep: Prepared) -> tuple[list[str], list[str], bool]:
    """Fixed-time keys (one per kernel variant), launch-time keys, whether fp32 SIMT is in."""
    keys = sorted(set(prep.variant))
    timings = sorted(set(prep.timing) - set(NO_LAUNCH_TIMINGS))
    return keys, timings, bool(prep.simt.any())


def _unpack(theta: np.ndarray, family: str, classes: list[str], timings: list[str],
            has_simt: bool, base: FamilyParams) -> FamilyParams:
    it = iter(theta)
    intercept = {"tensor": next(it)}
    if has_simt:
        intercept["simt"] = next(it)
    elif "simt" in base.compute_intercept:
        intercept["simt"] = base.compute_intercept["simt"]
    power, mem, bw = next(it), next(it), next(it)
    block_bw = float(np.exp(next(it)))  # blocks per SM that saturate bandwidth
    block_time = float(np.exp(next(it)))
    fixed = {c: float(np.exp(next(it))) for c in classes}
    fixed.update(_class_medians(fixed))
    fixed["default"] = float(statistics.median([v for k, v in fixed.items() if "/" in k]))
    launch = {**dict.fromkeys(NO_LAUNCH_TIMINGS, 0.0),
              **{t: float(np.exp(next(it))) for t in timings}}
    q = 1.0 + float(np.exp(next(it)))
    return FamilyParams(family=family, compute_intercept={k: float(v) for k, v in
                                                           intercept.items()},
                        power_slope=float(power), memory_intercept=float(mem),
                        bandwidth_slope=float(bw), blocks_per_sm_to_saturate=block_bw,
                        block_time_s=block_time,
                        fixed_s=fixed, launch_s=launch,
                        smoothness=q)


def _class_medians(fixed: dict[str, float]) -> dict[str, float]:
    """Median fixed time per dtype class, for variants never measured."""
    from perfcast.kernels._physics import _dtype_class

    by_class: dict[str, list[float]] = {}
    for key, value in fixed.items():
        by_class.setdefault(_dtype_class(key.rsplit("/", 1)[-1]), []).append(value)
    return {c: float(statistics.median(v)) for c, v in by_class.items()}


def fit_family(family: str, prep: Prepared, latency_s: np.ndarray, groups: np.ndarray,
               init: FamilyParams | None = None, power_feature: bool = True,
               prior_weight: float = 0.0) -> FamilyParams:
    """Fit a family's parameters by soft-L1 least squares on log(time), devices weighted
    equally. `power_feature=False` pins the power slope at 0 (devices too alike to identify
    it). `prior_weight` > 0 pulls every parameter toward `init` (a device's own refit from a
    small sample of its measurements, the target-measured tier)."""
    base = init or FamilyParams(family)
    classes, timings, has_simt = _layout(prep)
    theta0 = [base.compute_intercept.get("tensor", 1.5)]
    if has_simt:
        theta0.append(base.compute_intercept.get("simt", 1.5))
    theta0 += [base.power_slope, base.memory_intercept, base.bandwidth_slope,
               np.log(base.blocks_per_sm_to_saturate), np.log(base.block_time_s)]
    theta0 += [np.log(base.fixed_s.get(c, 3e-6)) for c in classes]
    theta0 += [np.log(max(base.launch_s.get(t, 8e-6), 1e-7)) for t in timings]
    theta0.append(np.log(max(base.smoothness - 1.0, 1.5)))
    lower = np.full(len(theta0), -np.inf)
    upper = np.full(len(theta0), np.inf)
    power_at = 1 + int(has_simt)
    # Fully power-limited silicon delivers constant FLOPs per watt: η ∝ (P/TDP)^-1, a logit
    # slope of -1 where η is small; steeper would extrapolate past physics to new parts.
    lower[power_at], upper[power_at] = -1.0, 0.0
    theta0[power_at] = float(np.clip(theta0[power_at], -0.999, -0.001))
    if not power_feature:
        lower[power_at], upper[power_at] = -1e-9, 1e-9
        theta0[power_at] = 0.0
    lower[power_at + 2], upper[power_at + 2] = -2.0, 2.0  # bandwidth slope stays mild
    lower[power_at + 3], upper[power_at + 3] = np.log(0.05), np.log(64.0)  # blocks per SM
    times = slice(power_at + 4, len(theta0) - 1)  # block, fixed, launch seconds, as logs
    lower[times], upper[times] = np.log(1e-8), np.log(1e-2)
    theta0 = list(np.clip(theta0, lower + 1e-9, upper - 1e-9))
    lower[-1], upper[-1] = np.log(1.0), np.log(20.0)  # smooth max with q in [2, 21]
    w = _weights(groups)
    log_meas = np.log(latency_s)

    anchor = np.asarray(theta0, dtype=float)

    def residual(theta: np.ndarray) -> np.ndarray:
        params = _unpack(theta, family, classes, timings, has_simt, base)
        fit = w * (np.log(evaluate(params, prep)) - log_meas)
        if prior_weight:
            fit = np.concatenate([fit, prior_weight * (theta - anchor)])
        return fit

    from scipy.optimize import least_squares  # ~0.3 s to import: only when fitting

    sol = least_squares(residual, np.asarray(theta0, dtype=float), bounds=(lower, upper),
                        loss="soft_l1", f_scale=_F_SCALE * float(np.median(w)), max_nfev=400)
    return _unpack(sol.x, family, classes, timings, has_simt, base)
