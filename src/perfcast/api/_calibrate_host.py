"""The composition term of a calibration: how fast this host drives the stack, fitted on
whole steps timed on the device (`perfcast measure --model` writes `<out>.steps.json`).

Kernels calibrated alone leave what only a whole step shows: the host's per-kernel Python
and dispatch cost, launch gaps, what the op table and the real model disagree on. perfcast
prices those through the stack's host model divided by `--host-speed`; this module estimates
that speed from the measured steps (`fit_host_speed`) and keeps it only if it beats the
stack's host model on held-out steps.

Each step has its own speed: the one whose forecast equals the measured time (forecast time
falls monotonically as host speed grows: bisection). A step whose host share is small cannot
tell a slow host from a kernel error: the 40% of a CPU forward pass that its kernels miss
would take a host 30x slower than the model to explain, while the decode step, with the same
kernel count, says the host is close to it. So the estimate is a precision-weighted mean in
log space (a Gaussian prior and Gaussian step errors): the prior is the stack's host model
(log speed 0, spread HOST_PRIOR_SPREAD) and each step's log speed counts with precision
(host share / kernel error)^2, the standard error of a log speed read off a step whose kernels
are off by the kernel error and whose time moves by the host share per unit log speed. A
step's kernel error is its families' held-out |log error| from the calibration's own check,
weighted by their forecast seconds (DEFAULT_KERNEL_ERROR for a family the check did not
score).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from perfcast.api._base import run
from perfcast.api._step import StepRequest, StepResult
from perfcast.measure import StepMeasurement, StepMeasurements

__all__ = ["HOST_PRIOR_SPREAD", "HOST_SPEED_RANGE", "HostFit", "fit_host_speed"]

HOST_SPEED_RANGE = (0.01, 100.0)  # EngineStackChoice.host_speed's bounds
# One standard deviation of log host speed around the stack's host model: a host 4x faster
# or slower than the model's reference CPU (an assumption, not a fit: no public table times
# one stack's host overhead on many CPUs).
HOST_PRIOR_SPREAD = math.log(4.0)
# The |log error| of a family the calibration did not check, priced by the shipped model:
# validate calibration's median uncalibrated MAPE per (device, family) is 0.24-0.32.
DEFAULT_KERNEL_ERROR = 0.25
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


def _forecast(options: dict[str, Any], host_speed: float) -> StepResult:
    return run(StepRequest.from_options(options, host_speed=host_speed))


def _forecast_s(options: dict[str, Any], host_speed: float) -> float:
    return _forecast(options, host_speed).time_s


def _kernel_error(result: StepResult, dtype: str, errors: Mapping[str, float]) -> float:
    """The step's kernel |log error|: its families' errors (`errors`, keyed family/dtype)
    weighted by their seconds in the forecast."""
    seconds = {k.removeprefix("family."): v for k, v in result.step.breakdown().items()
               if k.startswith("family.") and v > 0}
    total = sum(seconds.values())
    if not total:
        return DEFAULT_KERNEL_ERROR
    return sum(t * errors.get(f"{f}/{dtype}", DEFAULT_KERNEL_ERROR)
               for f, t in seconds.items()) / total


def _speed_for(options: dict[str, Any], measured_s: float, fastest_s: float) -> float:
    """The host speed whose forecast equals `measured_s` (clipped to HOST_SPEED_RANGE);
    `fastest_s`: the forecast at the range's fast end, which the caller already has."""
    slow, fast = HOST_SPEED_RANGE
    if fastest_s >= measured_s:
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
    speed estimated from the other steps (held out), its own speed and host share."""

    stack: str
    host_speed: float
    steps: tuple[dict[str, Any], ...]
    kept: bool  # False: the held-out check kept the stack's host model (speed 1)

    def to_dict(self) -> dict[str, Any]:
        return {"stack": self.stack, "host_speed": self.host_speed, "fitted": self.kept,
                "prior_spread": HOST_PRIOR_SPREAD,
                "steps": list(self.steps)}


def _error(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured


def _log_errors(forecast: np.ndarray, measured: np.ndarray) -> np.ndarray:
    return np.abs(np.log(forecast / measured))


def _estimate(log_own: np.ndarray, precision: np.ndarray, prior_precision: float) -> float:
    """The posterior mean log speed: the steps' log speeds and the prior's 0, each weighted
    by its precision."""
    return float(np.sum(precision * log_own) / (prior_precision + np.sum(precision)))


def fit_host_speed(steps: StepMeasurements, calibration: Path, hardware: dict[str, Any],
                   kernel_errors: Mapping[str, float] | None = None) -> HostFit:
    """Fit the host speed of `steps.stack` on the device (`hardware`: step's `gpu` or
    `device_spec` option) given the kernel calibration file just written and the held-out
    mean |log error| of each family/dtype it checked (`kernel_errors`).

    The fit is the precision-weighted mean of the steps' log speeds and the prior (module
    docstring). Leave-one-step-out: each step forecast with the speed estimated from the
    others. The fit is kept only when those held-out forecasts have less total |log error|
    than speed 1; else the calibration keeps the stack's host model (host speed 1) and says
    so."""
    options = [_options(steps, s, hardware, calibration) for s in steps.steps]
    measured = np.array([s.measured_s for s in steps.steps])
    base = [_forecast(o, 1.0) for o in options]
    at_one = np.array([b.time_s for b in base])
    hostless = np.array([_forecast_s(o, HOST_SPEED_RANGE[1]) for o in options])
    own = np.array([_speed_for(o, m, f)
                    for o, m, f in zip(options, measured, hostless, strict=True)])
    share = np.clip(1.0 - hostless / at_one, 0.0, 1.0)  # of the step at speed 1
    sigma = np.array([max(_kernel_error(b, steps.dtype, kernel_errors or {}), 1e-3)
                      for b in base])
    precision = (share / sigma) ** 2
    held_speed = _held_out_speeds(np.log(own), precision)
    held = np.array([_forecast_s(o, v) for o, v in zip(options, held_speed, strict=True)])
    keep = len(measured) > 1 and (_log_errors(held, measured).sum()
                                  < _log_errors(at_one, measured).sum())
    speed = _speed(np.log(own), precision) if keep else 1.0
    fitted = np.array([_forecast_s(o, speed) for o in options]) if keep else at_one
    columns = {"measured_s": measured, "kernels_only_s": at_one, "fitted_s": fitted,
               "held_out_s": held, "own_host_speed": own, "host_share": share,
               "kernel_error": sigma, "held_out_host_speed": held_speed}
    rows = tuple(_step_row(steps, i, hardware, {k: float(v[i]) for k, v in columns.items()})
                 for i in range(len(measured)))
    return HostFit(steps.stack, speed, rows, bool(keep))


def _speed(log_own: np.ndarray, precision: np.ndarray) -> float:
    """The estimate from these steps (the posterior mean under the prior)."""
    return _clip(math.exp(_estimate(log_own, precision, 1.0 / HOST_PRIOR_SPREAD ** 2)))


def _held_out_speeds(log_own: np.ndarray, precision: np.ndarray) -> np.ndarray:
    """Each step's speed estimated from the other steps (1, the prior's, for a lone step)."""
    n = len(log_own)
    if n < 2:
        return np.ones(n)
    return np.array([_speed(np.delete(log_own, i), np.delete(precision, i))
                     for i in range(n)])


def _step_row(steps: StepMeasurements, i: int, hardware: dict[str, Any],
              values: dict[str, float]) -> dict[str, Any]:
    """One step of HostFit.steps: its shape, the forecasts and errors, its readings."""
    step, m = steps.steps[i], values["measured_s"]
    uncalibrated = _forecast_s(_options(steps, step, hardware, None), 1.0)
    alone = len(steps.steps) < 2  # nothing to hold it out against
    return {
        "mode": step.mode, "runner": step.runner, "batch": step.batch,
        "seq_len": step.seq_len, "context": step.context, "measured_s": m,
        "quiet": step.quiet, "uncalibrated_s": uncalibrated,
        "kernels_only_s": values["kernels_only_s"], "fitted_s": values["fitted_s"],
        "held_out_s": None if alone else values["held_out_s"],
        "uncalibrated_error": _error(uncalibrated, m),
        "kernels_only_error": _error(values["kernels_only_s"], m),
        "held_out_error": None if alone else _error(values["held_out_s"], m),
        "own_host_speed": values["own_host_speed"], "host_share": values["host_share"],
        "kernel_error": values["kernel_error"],
        "held_out_host_speed": None if alone else values["held_out_host_speed"]}
