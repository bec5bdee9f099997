"""A device's own corrections from a user's measurements that never make forecasts worse.

`calibrate_device` is what `perfcast calibrate` runs. Per kernel family and dtype it fits the
device's corrections (`add_target_corrections`, the target-measured tier) and checks them by
k-fold cross-validation against the model the user has without them (`base`: the shipped
calibration, with whatever corrections it already holds for the device), on the same held-out
rows. The new corrections are kept where they are better out of sample by MIN_GAIN on MAPE
(the measure the reports print), or by LOG_MIN_GAIN on the mean |log(predicted / measured)|
with MAPE no worse. MAPE alone favours a model that forecasts too fast (an error of -50%
counts 50%, one of +100% counts 100%: Tofallis 2015, "A better measure of relative prediction
accuracy"): a CPU's GEMM fit that halves a 2x underestimate of a step's largest kernels tied
with the shipped model on MAPE and was rejected. A family that fails keeps the base's, and
the report says so; the families that pass are merged into the base family by family.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from perfcast.kernels._calibration import (
    Calibration,
    PhysicsModel,
    add_target_corrections,
    kernel_rows,
    measurement_ops,
)
from perfcast.kernels._physics import variants
from perfcast.specs import Device

__all__ = ["CALIBRATED", "KEPT_BASE", "LOG_MIN_GAIN", "MIN_GAIN", "DeviceCalibration",
           "FamilyCheck", "calibrate_device", "log_error", "mape"]

CALIBRATED = "calibrated"
KEPT_BASE = "kept shipped"
MIN_ROWS = 4  # fewer rows in a family x dtype cannot be cross-validated
WARN_ERROR = 0.25  # held-out MAPE above which a calibrated family is worth a warning
# Relative held-out gain the new corrections need over the base: a smaller one is within
# what another 10% sample would change (validate calibration: at 2%, 4 of the 8 family x dtype
# groups that came out worse on the other 90% keep the base instead, 5 of 222 better ones
# do too).
MIN_GAIN = 0.02
# Relative held-out gain on mean |log error| that keeps a fit MAPE does not prefer (with MAPE
# no worse). validate calibration (all stores): of the 6 family x dtype groups whose check
# gained 2-10% on it, 3 came out worse on MAPE on the other 90%; the one above 10% was better.
LOG_MIN_GAIN = 0.10
_SHAPE = ["b", "m", "n", "k", "heads", "kv_heads", "head_dim", "q_len", "kv_len"]


def mape(predicted: np.ndarray, measured: np.ndarray) -> float:
    """Mean |predicted - measured| / measured."""
    measured = np.asarray(measured, dtype=float)
    return float(np.mean(np.abs(np.asarray(predicted, dtype=float) - measured) / measured))


def log_error(predicted: np.ndarray, measured: np.ndarray) -> float:
    """Mean |log(predicted / measured)|: a forecast 2x too slow and one 2x too fast err
    alike."""
    ratio = np.asarray(predicted, dtype=float) / np.asarray(measured, dtype=float)
    return float(np.mean(np.abs(np.log(ratio))))


@dataclass(frozen=True)
class FamilyCheck:
    """One family x dtype of the measurements: its rows, the k-fold held-out MAPE and mean
    |log error| of the base model and of the new corrections on the same rows, and which one
    the calibration keeps (`status`: CALIBRATED or KEPT_BASE, with the reason)."""

    key: str
    rows: int
    folds: int
    base_mape: float | None
    calibrated_mape: float | None
    in_sample_mape: float | None
    status: str
    reason: str
    default_op: str | None
    base_log_error: float | None = None
    calibrated_log_error: float | None = None

    @property
    def kept_log_error(self) -> float | None:
        """Held-out mean |log error| of the model this family is forecast with."""
        return (self.calibrated_log_error if self.status == CALIBRATED
                else self.base_log_error)

    def to_dict(self) -> dict:
        return {"family": self.key, "rows": self.rows, "folds": self.folds,
                "base_heldout_mape": self.base_mape,
                "calibrated_heldout_mape": self.calibrated_mape,
                "calibrated_in_sample_mape": self.in_sample_mape,
                "base_heldout_log_error": self.base_log_error,
                "calibrated_heldout_log_error": self.calibrated_log_error,
                "status": self.status, "reason": self.reason, "default_op": self.default_op}


@dataclass(frozen=True)
class DeviceCalibration:
    """The device's corrections that passed the check (`own`: only this device, the file
    `calibrate` writes), the base merged with them (`merged`: what forecasts price with) and
    the check of every family x dtype measured."""

    own: Calibration
    merged: Calibration
    checks: tuple[FamilyCheck, ...]

    @property
    def calibrated(self) -> list[str]:
        return [c.key for c in self.checks if c.status == CALIBRATED]

    @property
    def kept(self) -> list[str]:
        return [c.key for c in self.checks if c.status != CALIBRATED]

    def warnings(self) -> list[str]:
        """Families calibrated with a large held-out error, and families the check kept."""
        out = [f"{c.key}: held-out error {c.calibrated_mape:.0%} after calibration (above "
               f"{WARN_ERROR:.0%}): forecasts of it stay uncertain" for c in self.checks
               if c.status == CALIBRATED and (c.calibrated_mape or 0.0) > WARN_ERROR]
        out += [f"{c.key}: kept the shipped model ({c.reason})" for c in self.checks
                if c.status != CALIBRATED]
        return out


def _shape_codes(rows: pd.DataFrame) -> np.ndarray:
    """A code per row, 0..shapes-1, the same for every timing of one kernel shape (a
    graph-timed and an eager row of a kernel are held out together)."""
    cols = [c for c in _SHAPE if c in rows.columns]
    shape_id = pd.util.hash_pandas_object(rows[["op", *cols]], index=False).to_numpy()
    return np.unique(shape_id, return_inverse=True)[1].reshape(-1)


def _shape_folds(codes: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """A fold per row from its shape code: shapes dealt to folds in a seeded order."""
    shapes = int(codes.max()) + 1
    order = np.random.default_rng(seed).permutation(shapes)
    fold_of = np.empty(shapes, dtype=int)
    fold_of[order] = np.arange(shapes) % folds
    return fold_of[codes]


def _predict(cal: Calibration, rows: pd.DataFrame, device: Device) -> np.ndarray:
    return PhysicsModel(cal).kernel_times(measurement_ops(rows), device,
                                          rows["timing"].to_numpy(dtype=object))


def _only(cal: Calibration, device: str, keys: list[str]) -> dict:
    own = cal.devices.get(device, {})
    return {k: own[k] for k in keys if k in own}


def _with_default_op(cal: Calibration, device: str, key: str, op: str) -> None:
    corr = cal.devices.get(device, {}).get(key)
    if corr is not None:
        corr.default_op = op


def _check(base: Calibration, rows: pd.DataFrame, device: Device, key: str,
           folds: int, seed: int) -> tuple[FamilyCheck, dict]:
    """Cross-validate one family x dtype; (its check, the corrections to keep: {} if none)."""
    specs = {device.name: device}
    kernels = pd.Series(variants(measurement_ops(rows))).str.rsplit("/", n=1).str[0]
    default_op = str(kernels.value_counts().sort_index()
                     .sort_values(ascending=False, kind="stable").index[0])
    codes = _shape_codes(rows)
    k = min(folds, int(codes.max()) + 1)
    if len(rows) < MIN_ROWS or k < 2:
        return FamilyCheck(key, len(rows), 0, None, None, None, KEPT_BASE,
                           f"{len(rows)} rows: too few to check out of sample",
                           default_op), {}
    fold = _shape_folds(codes, k, seed)
    base_pred = _predict(base, rows, device)  # the base saw none of the rows: one pass
    new_pred = np.empty(len(rows))
    for i in range(k):
        held = fold == i
        fitted = add_target_corrections(base, rows[~held], specs)
        _with_default_op(fitted, device.name, key, default_op)
        new_pred[held] = _predict(fitted, rows[held], device)
    measured = rows["latency_s"].to_numpy(dtype=float)
    base_err, new_err = mape(base_pred, measured), mape(new_pred, measured)
    base_log, new_log = log_error(base_pred, measured), log_error(new_pred, measured)
    full = add_target_corrections(base, rows, specs)
    _with_default_op(full, device.name, key, default_op)
    in_sample = mape(_predict(full, rows, device), measured)
    errors = (base_err, new_err, in_sample)
    logs = {"base_log_error": base_log, "calibrated_log_error": new_log}
    if _better((base_err, base_log), (new_err, new_log)):
        return FamilyCheck(key, len(rows), k, *errors, CALIBRATED,
                           f"held-out error {base_err:.1%} -> {new_err:.1%} (|log| "
                           f"{base_log:.3f} -> {new_log:.3f})", default_op,
                           **logs), _only(full, device.name, [key])
    return FamilyCheck(key, len(rows), k, *errors, KEPT_BASE,
                       f"new fit not {MIN_GAIN:.0%} better out of sample on MAPE, nor "
                       f"{LOG_MIN_GAIN:.0%} on |log| with MAPE no worse: {new_err:.1%} vs "
                       f"{base_err:.1%}, |log| {new_log:.3f} vs {base_log:.3f}",
                       default_op, **logs), {}


def _better(base: tuple[float, float], new: tuple[float, float]) -> bool:
    """(MAPE, |log error|) of the new fit beat the base's: MAPE by MIN_GAIN, or |log error|
    by LOG_MIN_GAIN with MAPE no worse."""
    (base_mape, base_log), (new_mape, new_log) = base, new
    return new_mape < base_mape * (1.0 - MIN_GAIN) or (
        new_log < base_log * (1.0 - LOG_MIN_GAIN) and new_mape <= base_mape)


def calibrate_device(base: Calibration, rows: pd.DataFrame, device: Device, *,
                     folds: int = 5, seed: int = 0,
                     provenance: dict | None = None) -> DeviceCalibration:
    """The device's own corrections from its measured `rows` (store schema, one device),
    each family x dtype kept only where it beats `base` out of sample (`folds`-fold
    cross-validation over shapes, seeded); collectives are not fitted here."""
    kept: dict = {}
    checks = []
    for (family, dtype), part in kernel_rows(rows).groupby(["family", "dtype"], sort=True):
        check, own = _check(base, part, device, f"{family}/{dtype}", folds, seed)
        checks.append(check)
        kept.update(own)
    prov = {**(provenance or {}), "checks": [c.to_dict() for c in checks]}
    own_cal = Calibration(base.families, base.residuals, {device.name: kept} if kept else {},
                          prov)
    return DeviceCalibration(own_cal, base.merged_with(own_cal), tuple(checks))
