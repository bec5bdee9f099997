"""The composition term of a calibration: how fast this host drives the stack, fitted on
whole steps timed on the device (`perfcast measure --model` writes `<out>.steps.json`).

Kernels calibrated alone leave what only a whole step shows: the host's per-kernel Python
and dispatch cost, launch gaps, what the op table and the real model disagree on. perfcast
prices those through the stack's host model divided by `--host-speed`; this module finds the
host speed that makes `perfcast step` (with the fitted kernels) match each measured step,
and keeps the one that fits all steps best, if it beats the stack's own host model on held-out
steps (`fit_host_speed`). Forecast step time falls monotonically as host speed grows, so each
step's speed is found by bisection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from perfcast.api._base import run
from perfcast.api._step import StepRequest
from perfcast.measure import StepMeasurement, StepMeasurements

__all__ = ["HOST_SPEED_RANGE", "HostFit", "fit_host_speed"]

HOST_SPEED_RANGE = (0.01, 100.0)  # EngineStackChoice.host_speed's bounds
_BISECTIONS = 14  # log2(1e4) / 2^-14: the speed to within 0.06%


def _options(steps: StepMeasurements, step: StepMeasurement, hardware: dict[str, Any],
             calibration: Path | None) -> dict[str, Any]:
    """The `perfcast step` options that forecast one measured step."""
    model = {"model_config": steps.model_config} if steps.model_config else {
        "model": steps.model}
    out = {**model, **hardware, "mode": step.mode, "batch": step.batch, "dtype": steps.dtype,
           "stack": steps.stack}
    if step.mode == "decode":
        out["context"] = step.context
    elif step.seq_len is not None:
        out["seq_len"] = step.seq_len
    if step.optimizer is not None:
        out["optimizer"] = step.optimizer
    if calibration is not None:
        out["calibration"] = str(calibration)
    return out


def _forecast_s(options: dict[str, Any], host_speed: float) -> float:
    return run(StepRequest.from_options(options, host_speed=host_speed)).time_s


def _speed_for(options: dict[str, Any], measured_s: float) -> float:
    """The host speed whose forecast equals `measured_s` (clipped to HOST_SPEED_RANGE)."""
    slow, fast = HOST_SPEED_RANGE
    if _forecast_s(options, fast) >= measured_s:
        return fast
    if _forecast_s(options, slow) <= measured_s:
        return slow
    lo, hi = math.log(slow), math.log(fast)
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        if _forecast_s(options, math.exp(mid)) > measured_s:
            lo = mid
        else:
            hi = mid
    return _clip(math.exp((lo + hi) / 2))


def _clip(speed: float) -> float:
    """Within HOST_SPEED_RANGE (exp(log(x)) is not always x to the last bit)."""
    return min(max(speed, HOST_SPEED_RANGE[0]), HOST_SPEED_RANGE[1])


@dataclass(frozen=True)
class HostFit:
    """The fitted host speed of a stack on this device (1 when the check kept the stack's
    host model), and per step: measured seconds, the forecast without the user calibration,
    with its kernels alone (host speed 1), with the fitted speed (in sample) and with the
    speed chosen on the other steps (held out)."""

    stack: str
    host_speed: float
    steps: tuple[dict[str, Any], ...]
    kept: bool  # False: the held-out check kept the stack's host model (speed 1)

    def to_dict(self) -> dict[str, Any]:
        return {"stack": self.stack, "host_speed": self.host_speed, "fitted": self.kept,
                "steps": list(self.steps)}


def _error(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured


def _log_errors(forecast: np.ndarray, measured: np.ndarray) -> np.ndarray:
    return np.abs(np.log(forecast / measured))


def _best(errors: np.ndarray, candidates: np.ndarray, steps: np.ndarray) -> int:
    """The candidate speed whose forecasts of `steps` have the least total |log error|."""
    return int(np.argmin(errors[np.ix_(candidates, steps)].sum(axis=1)))


def fit_host_speed(steps: StepMeasurements, calibration: Path,
                   hardware: dict[str, Any]) -> HostFit:
    """Fit the host speed of `steps.stack` on the device (`hardware`: step's `gpu` or
    `device_spec` option) given the kernel calibration file just written.

    Each step's own speed (bisection) is a candidate, and so is 1 (the stack's host model
    as shipped); the fit is the candidate with the least total |log error| over the steps.
    Leave-one-step-out: each step forecast with the candidate chosen on the others (its own
    speed excluded). The fit is kept only when that held-out error beats speed 1; else the
    calibration keeps the stack's host model (host speed 1) and says so."""
    options = [_options(steps, s, hardware, calibration) for s in steps.steps]
    measured = np.array([s.measured_s for s in steps.steps])
    own = np.array([_speed_for(o, m) for o, m in zip(options, measured, strict=True)])
    speeds = np.append(own, 1.0)  # the last candidate: the stack's host model as shipped
    forecast = np.array([[_forecast_s(o, v) for o in options] for v in speeds])
    errors = _log_errors(forecast, measured[None, :])
    n = len(measured)
    held = np.empty(n)
    for i in range(n):
        others = np.delete(np.arange(n), i)
        if not len(others):
            held[i] = forecast[-1, i]
            continue
        pick = np.append(others, n)  # the others' speeds and speed 1, never step i's own
        held[i] = forecast[pick[_best(errors, pick, others)], i]
    keep = _log_errors(held, measured).sum() < errors[-1].sum()
    chosen = _best(errors, np.arange(n + 1), np.arange(n)) if keep else n
    rows = []
    for i, step in enumerate(steps.steps):
        uncalibrated = _forecast_s(_options(steps, step, hardware, None), 1.0)
        m = float(measured[i])
        rows.append({
            "mode": step.mode, "runner": step.runner, "batch": step.batch,
            "seq_len": step.seq_len, "context": step.context, "measured_s": m,
            "quiet": step.quiet, "uncalibrated_s": uncalibrated,
            "kernels_only_s": float(forecast[-1, i]), "fitted_s": float(forecast[chosen, i]),
            "held_out_s": float(held[i]) if n > 1 else None,
            "uncalibrated_error": _error(uncalibrated, m),
            "kernels_only_error": _error(float(forecast[-1, i]), m),
            "held_out_error": _error(float(held[i]), m) if n > 1 else None,
            "own_host_speed": float(own[i])})
    return HostFit(steps.stack, float(speeds[chosen]), tuple(rows), bool(keep))
