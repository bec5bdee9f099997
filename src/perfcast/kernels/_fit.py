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
                        smoothness=q, device_range=base.device_range)


def _class_medians(fixed: dict[str, float]) -> dict[str, float]:
    """Median fixed time per dtype class, for variants never measured."""
    from perfcast.kernels._physics import _dtype_class

    by_class: dict[str, list[float]] = {}
    for key, value in fixed.items():
        by_class.setdefault(_dtype_class(key.rsplit("/", 1)[-1]), []).append(value)
    return {c: float(statistics.median(v)) for c, v in by_class.items()}


def fit_family(family: str, prep: Prepared, latency_s: np.ndarray, groups: np.ndarray,
               init: FamilyParams | None = None, device_slopes: bool = True,
               prior_weight: float = 0.0) -> FamilyParams:
    """Fit a family's parameters by soft-L1 least squares on log(time), devices weighted
    equally. `device_slopes=False` pins the power and bandwidth slopes at 0 (one device: no
    trend across devices to fit). A refit from `init` keeps its `device_range`.
    `prior_weight` > 0 pulls every parameter toward `init` (a device's own refit from a
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
    lower[power_at + 2], upper[power_at + 2] = -2.0, 2.0  # bandwidth slope stays mild
    if not device_slopes:
        for at in (power_at, power_at + 2):
            lower[at], upper[at] = -1e-9, 1e-9
            theta0[at] = 0.0
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

    start = np.asarray(theta0, dtype=float)
    support = _support(prep, classes, timings, power_at + 5, len(start), bool(prior_weight))
    residual_rows = len(log_meas) + (len(start) if prior_weight else 0)
    fun, jac = _grouped_jacobian(residual, support, residual_rows, lower, upper)
    sol = least_squares(fun, start, bounds=(lower, upper), jac=jac,
                        loss="soft_l1", f_scale=_F_SCALE * float(np.median(w)), max_nfev=400)
    return _unpack(sol.x, family, classes, timings, has_simt, base)


def _support(prep: Prepared, classes: list[str], timings: list[str], first_fixed: int,
             n: int, prior: bool) -> list[np.ndarray | None]:
    """Per parameter, the residual rows it can move (None: every row). A variant's fixed
    time moves its own rows (a row whose fixed key is no fitted variant takes a median over
    them: every fixed time moves it), a timing's launch time the rows timed that way; the
    compute, memory, block and smoothness terms move every row. With a prior, parameter j
    also moves its own prior row."""
    m = len(prep.variant)
    out: list[np.ndarray | None] = [None] * n
    codes, pairs = prep.fixed_keys
    column = {c: first_fixed + i for i, c in enumerate(classes)}
    own = np.array([column.get(v, -1) for v, _ in pairs], dtype=np.int64)[codes]
    shared = own < 0
    for j in column.values():
        out[j] = (own == j) | shared
    tcodes, tnames = prep.timing_keys
    for i, t in enumerate(timings):
        out[first_fixed + len(classes) + i] = tcodes == tnames.index(t)
    rows = []
    for j, sel in enumerate(out):
        hit = np.ones(m, dtype=bool) if sel is None else sel
        if prior:
            hit = np.concatenate([hit, np.arange(n) == j])
        rows.append(None if hit.all() else np.flatnonzero(hit))
    return rows


def _groups(support: list[np.ndarray | None], m: int) -> list[list[int]]:
    """Parameters perturbed together: each one moving every row alone, the others greedily
    into the first group none of whose rows they move (Curtis, Powell & Reid 1974)."""
    groups: list[list[int]] = []
    taken: list[np.ndarray] = []
    for j, rows in enumerate(support):
        if rows is None:
            groups.append([j])
            taken.append(np.ones(m, dtype=bool))
            continue
        for group, used in zip(groups, taken, strict=True):
            if not used[rows].any():
                group.append(j)
                used[rows] = True
                break
        else:
            used = np.zeros(m, dtype=bool)
            used[rows] = True
            groups.append([j])
            taken.append(used)
    return groups


def _grouped_jacobian(residual, support: list[np.ndarray | None], rows: int,
                      lower: np.ndarray, upper: np.ndarray):
    """(fun, jac) for least_squares: `residual` remembering its last point, and its '2-point'
    Jacobian column for column the same numbers as scipy's dense scheme (scipy's step and
    bound rules, x + h with one parameter stepped at a time as that scheme steps it, exact
    zeros where a parameter cannot move a row) from one residual evaluation per group of
    parameters that move disjoint rows instead of one per parameter. (residual, '2-point')
    where scipy no longer has those rules."""
    try:
        from scipy.optimize._numdiff import _adjust_scheme_to_bounds, _compute_absolute_step
    except ImportError:  # pragma: no cover - a scipy that renamed its private helpers
        return residual, "2-point"
    last: dict[bytes, np.ndarray] = {}
    groups = _groups(support, rows)

    def fun(theta: np.ndarray) -> np.ndarray:
        out = residual(theta)
        last.clear()  # least_squares asks for the Jacobian where it last evaluated
        last[theta.tobytes()] = out
        return out

    def jac(theta: np.ndarray) -> np.ndarray:
        f0 = last.get(theta.tobytes())
        f0 = fun(theta) if f0 is None else f0
        h = _compute_absolute_step(None, theta, f0, "2-point")
        h, _ = _adjust_scheme_to_bounds(theta, h, 1, "1-sided", lower, upper)
        dx = (theta + h) - theta
        # laid out as scipy's (the transpose of a row per parameter): the solver's products
        # and SVD round as they do on its own Jacobian
        out_t = np.empty((len(theta), len(f0)))
        out_t[:] = (0.0 / dx)[:, None]  # (f - f0) / dx on a row the parameter cannot move
        for group in groups:
            x = theta.copy()
            x[group] = theta[group] + h[group]
            df = residual(x) - f0
            for j in group:
                rows = support[j]
                if rows is None:
                    out_t[j] = df / dx[j]
                else:
                    out_t[j, rows] = df[rows] / dx[j]
        return out_t.T

    return fun, jac
