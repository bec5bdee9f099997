"""Does a user's calibration beat no calibration? `perfcast validate calibration`.

For every device of a measurement store (the shipped default store, or a framework's kernel
tables: vllm, sglang), as a user who measured a tenth of it would see it:

  uncalibrated  a cross-generation fit on the store's *other* devices (`fit_calibration` on
                rows sampled per device x family x dtype): the device was never seen
  calibrated    `kernels.calibrate_device` (what `perfcast calibrate` runs) on a random
                TARGET_FRACTION (10%) of the device's rows, over that base: each family x dtype
                k-fold checked against the base on the sample, kept only where better
  unchecked     plain `add_target_corrections(base, sample)`: what calibrate did before
  roofline      the spec-sheet roofline (`roofline_times(..., waves=False)`)

Every method is scored on the device's other 90% (all of it in a full run). Groups: each
family, and each family x dtype (the unit the check keeps or rejects). A group's verdict
compares calibrated with uncalibrated: better, tie (the check kept the base: the forecast is
unchanged) or worse (the 10% check chose a fit that the other 90% disagrees with).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cache, partial
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from perfcast.errors import InputError
from perfcast.kernels import (
    PhysicsModel,
    add_target_corrections,
    fit_calibration,
    measurement_ops,
    roofline_times,
)
from perfcast.kernels._calibration import kernel_rows
from perfcast.kernels._target import (
    CALIBRATED,
    LOG_MIN_GAIN,
    MIN_GAIN,
    DeviceCalibration,
    FamilyCheck,
    calibrate_device,
)
from perfcast.measure import load_store
from perfcast.progress import ProgressFn
from perfcast.specs import get_device
from perfcast.validate._kernels import (
    TARGET_FRACTION,
    _sample,
    _target_sample,
    run_folds,
    stack_stores,
)
from perfcast.validate._reports import ValidationReport, _write, check_out_dir, md_table

__all__ = ["CALIBRATION_METHODS", "CALIBRATION_SOURCES", "calibration_report",
           "summarise_calibration", "validate_calibration"]

CALIBRATION_SOURCES = ("default", "vllm", "sglang")
CALIBRATION_METHODS = ("roofline", "uncalibrated", "unchecked", "calibrated")
NOT_SAMPLED = "not sampled"  # the 10% sample held no row of the group: nothing to calibrate
VERDICTS = ("better", "tie", "worse")


@dataclass(frozen=True)
class CheckSize:
    """Rows of one run: `base_rows` per other-device x family x dtype for the uncalibrated
    fit; the device's rows drawn from, per family x dtype, before the 10% / 90% split
    (`device_rows`; None: all); scored rows per family x dtype of the 90% (None: all)."""

    base_rows: int
    device_rows: int | None
    scored_rows: int | None


# full: all of each device's rows; the base fit capped at 1000 rows per group (~35 s a
# device; 2000, as `validate kernels`, ~75 s: the full run of all stores would double from
# ~10 min on two cores); quick: a CI cut of a few devices, ~50 s
SIZES = {"full": CheckSize(1000, None, None), "quick": CheckSize(300, 1500, 300)}
# --quick holds out: an AIConfigurator + Vidur + LLMCompass GPU and a NeuSight (eager) one
QUICK_DEVICES = {"default": ("a100-sxm4-80gb", "t4"), "vllm": ("h100-sxm",),
                 "sglang": ("h100-sxm",)}
ROW_COLUMNS = ["source", "device", "group", "status", "sampled", "n", "roofline_mape",
               "uncalibrated_mape", "unchecked_mape", "calibrated_mape",
               "uncalibrated_log_error", "calibrated_log_error",
               "check_base_mape", "check_calibrated_mape", "check_base_log_error",
               "check_calibrated_log_error", "verdict"]


@cache
def _shipped(source: str) -> pd.DataFrame:
    """A shipped store's kernel rows (once per process: forked or fresh workers alike)."""
    if source == "default":
        return kernel_rows(load_store())
    return stack_stores((source,))[source]


def _verdict(calibrated: float, uncalibrated: float) -> str:
    if calibrated == uncalibrated:
        return "tie"
    return "better" if calibrated < uncalibrated else "worse"


def _family_status(statuses: list[str]) -> str:
    """A family's status from its dtypes': one shared status, or how many were calibrated."""
    if len(set(statuses)) == 1:
        return statuses[0]
    return f"{CALIBRATED} {statuses.count(CALIBRATED)}/{len(statuses)} dtypes"


def _score(source: str, device: str, held: pd.DataFrame, sample: pd.DataFrame,
           predictions: dict[str, np.ndarray], result: DeviceCalibration) -> list[dict]:
    """Per family and per family x dtype of the scored rows: MAPE per method (mean |log
    error| beside it for the two the verdict compares), the check's status and held-out
    figures, rows sampled and scored, the verdict (on MAPE)."""
    measured = held["latency_s"].to_numpy(dtype=float)
    ape = {m: np.abs(np.asarray(p, dtype=float) - measured) / measured
           for m, p in predictions.items()}
    ale = {m: np.abs(np.log(np.asarray(predictions[m], dtype=float) / measured))
           for m in ("uncalibrated", "calibrated")}
    fam = held["family"].astype(str).to_numpy()
    key = fam + "/" + held["dtype"].astype(str).to_numpy()
    sampled = (sample["family"].astype(str) + "/" + sample["dtype"].astype(str)).value_counts()
    checks = {c.key: c for c in result.checks}
    out = []
    for labels in (fam, key):
        for group in sorted(set(labels)):
            sel = labels == group
            keys = sorted(set(key[sel]))
            statuses = [checks[k].status if k in checks else NOT_SAMPLED for k in keys]
            check = checks.get(group)
            mape = {m: float(a[sel].mean()) for m, a in ape.items()}
            out.append({"source": source, "device": device, "group": group,
                        "status": _family_status(statuses),
                        "sampled": int(sum(sampled.get(k, 0) for k in keys)),
                        "n": int(sel.sum()), **{f"{m}_mape": v for m, v in mape.items()},
                        **{f"{m}_log_error": float(a[sel].mean()) for m, a in ale.items()},
                        **_check_figures(check),
                        "verdict": _verdict(mape["calibrated"], mape["uncalibrated"])})
    return out


def _device_fold(stores: dict[str, pd.DataFrame] | None, source: str, device: str,
                 size: CheckSize, seed: int) -> list[dict]:
    """One held-out device (a worker process's task) on one BLAS thread: the fits solve
    many small least-squares problems, which threads only slow down (two workers on two
    cores ran 1.8x slower with BLAS's default threads)."""
    with threadpool_limits(limits=1):
        return _fold(stores, source, device, size, seed)


def _fold(stores: dict[str, pd.DataFrame] | None, source: str, device: str,
          size: CheckSize, seed: int) -> list[dict]:
    """Base fitted on the store's other devices, calibrated on a random TARGET_FRACTION of
    the device's rows, every method scored on the rest."""
    rows = (stores or {}).get(source)
    rows = _shipped(source) if rows is None else kernel_rows(rows)
    mine = (rows["device"] == device).to_numpy()
    base = fit_calibration(_sample(rows[~mine], size.base_rows, seed),
                           provenance={"check": "calibration", "held_out": device})
    sample, rest = _target_sample(_sample(rows[mine], size.device_rows, seed), seed)
    spec = get_device(device)
    result = calibrate_device(base, sample, spec, seed=seed)
    held = _sample(rest, size.scored_rows, seed)
    ops, timing = measurement_ops(held), held["timing"].to_numpy(dtype=object)
    predictions = {
        "roofline": roofline_times(ops, spec, waves=False),
        "uncalibrated": PhysicsModel(base).kernel_times(ops, spec, timing),
        "unchecked": PhysicsModel(add_target_corrections(base, sample)).kernel_times(
            ops, spec, timing),
        "calibrated": PhysicsModel(result.merged).kernel_times(ops, spec, timing),
    }
    return _score(source, device, held, sample, predictions, result)


def _check_figures(check: FamilyCheck | None) -> dict[str, float]:
    """The check's held-out figures on the 10% (NaN for a family row or an unchecked one)."""
    names = {"check_base_mape": "base_mape", "check_calibrated_mape": "calibrated_mape",
             "check_base_log_error": "base_log_error",
             "check_calibrated_log_error": "calibrated_log_error"}
    values = {k: None if check is None else getattr(check, v) for k, v in names.items()}
    return {k: np.nan if v is None else v for k, v in values.items()}


def _sources(source: str) -> tuple[str, ...]:
    if source == "all":
        return CALIBRATION_SOURCES
    if source not in CALIBRATION_SOURCES:
        raise InputError("source", f"unknown measurement store {source!r}",
                         [*CALIBRATION_SOURCES, "all"])
    return (source,)


def validate_calibration(source: str = "default", quick: bool = False, seed: int = 0,
                         progress: ProgressFn | None = None,
                         stores: dict[str, pd.DataFrame] | None = None,
                         devices: list[str] | None = None) -> pd.DataFrame:
    """Rows ROW_COLUMNS per held-out device x group (family, family/dtype) of each store of
    `source` (default, vllm, sglang or all): MAPE of the four methods on the 90% of the
    device's rows the calibration never saw. `quick`: QUICK_DEVICES and SIZES["quick"];
    `devices`: only these devices; `stores`: {source: store rows} instead of the shipped
    ones (a test's own rows). `progress(done, total)` after each device."""
    size = SIZES["quick" if quick else "full"]
    folds = []
    for name in _sources(source):
        given = (stores or {}).get(name)
        rows = _shipped(name) if given is None else given
        names = sorted(rows["device"].astype(str).unique())
        folds += [(name, d) for d in names if (devices is None or d in devices)
                  and (not quick or devices is not None or d in QUICK_DEVICES[name])]
    task = partial(_device_fold, stores, size=size, seed=seed)
    return pd.DataFrame(run_folds(task, folds, progress, fresh=True), columns=ROW_COLUMNS)


def summarise_calibration(rows: pd.DataFrame) -> pd.DataFrame:
    """Per source and level (family; family/dtype): how many (device, group) pairs the
    calibration made better, left unchanged (tie: kept) or worse, and the median over pairs
    of each method's MAPE."""
    level = np.where(rows["group"].str.contains("/", regex=False), "family/dtype", "family")
    out = []
    for (source, lvl), part in rows.assign(level=level).groupby(["source", "level"],
                                                                 sort=True):
        counts = part["verdict"].value_counts()
        out.append({"source": source, "level": lvl, "devices": part["device"].nunique(),
                    "pairs": len(part), **{v: int(counts.get(v, 0)) for v in VERDICTS},
                    **{f"median {m}_mape": float(part[f"{m}_mape"].median())
                       for m in CALIBRATION_METHODS}})
    return pd.DataFrame(out)


def calibration_report(quick: bool = False, source: str = "default", out: Path | None = None,
                       seed: int = 0, progress: ProgressFn | None = None) -> ValidationReport:
    """`validate_calibration` as a report: calibration.csv and calibration.md into `out`;
    extras: the summary, the worse pairs, the run's sizes."""
    _sources(source)
    check_out_dir(out)
    rows = validate_calibration(source, quick, seed, progress)
    summary = summarise_calibration(rows)
    worse = rows[rows["verdict"] == "worse"].reset_index(drop=True)
    size = SIZES["quick" if quick else "full"]
    _write(out, {"calibration.csv": rows,
                 "calibration.md": lambda: calibration_markdown(rows, summary, size, seed)})
    return ValidationReport(rows, {"summary": summary, "worse": worse,
                                   "sizes": asdict(size), "seed": seed,
                                   "target_fraction": TARGET_FRACTION})


def _table(rows: pd.DataFrame) -> str:
    cols = ["source", "device", "group", "sampled", "n", *(f"{m}_mape"
                                                            for m in CALIBRATION_METHODS),
            "status", "verdict"]
    return md_table(rows[cols])


def calibration_markdown(rows: pd.DataFrame, summary: pd.DataFrame, size: CheckSize,
                         seed: int) -> str:
    """calibration.md: what was run, the summary, the worse pairs, then every device x
    family and device x family/dtype."""
    sub = rows["group"].str.contains("/", regex=False)
    worse = rows[rows["verdict"] == "worse"]
    scored = "all of the other 90%" if size.scored_rows is None else \
        f"at most {size.scored_rows} rows per family x dtype of the other 90%"
    drawn = "all its rows" if size.device_rows is None else \
        f"at most {size.device_rows} of its rows per family x dtype"
    return "\n".join([
        "# perfcast validate calibration", "",
        "Does a calibration fitted on a random 10% of a device's measured rows beat no "
        "calibration on the other 90%? For each device of each store, held out in turn: "
        "`uncalibrated` is a cross-generation fit on the store's other devices "
        f"(`fit_calibration`, at most {size.base_rows} rows per other device x family x "
        "dtype, drawn at random: the full run of all three stores then takes about ten "
        "minutes on two cores); `calibrated` is `perfcast calibrate`'s fit "
        "(`kernels.calibrate_device`: each family x dtype 5-fold checked against the base "
        f"on the 10% sample, kept only where better: MAPE by {MIN_GAIN:.0%}, or mean |log "
        f"error| by {LOG_MIN_GAIN:.0%} with MAPE no worse) on a random 10% of the device's rows "
        f"(drawn from {drawn}); `unchecked` is the same sample without the check "
        "(`add_target_corrections`, what calibrate did before); `roofline` is the plain "
        f"spec-sheet roofline. Every method is scored on {scored} (seed {seed}).", "",
        "status: `calibrated` (the check kept the new corrections), `kept shipped` (it kept "
        "the base: the forecast is unchanged), `not sampled` (no row in the 10%). verdict: "
        "calibrated MAPE below (`better`), equal to (`tie`) or above (`worse`) the "
        "uncalibrated one on the scored rows.", "",
        "## Summary: (device, group) pairs per verdict, median MAPE over pairs", "",
        md_table(summary), "",
        "## Worse than uncalibrated", "",
        md_table(worse[ROW_COLUMNS]) if not worse.empty else "None.", "",
        "## Per device and family", "", _table(rows[~sub]), "",
        "## Per device and family x dtype (the unit the check keeps or rejects)", "",
        _table(rows[sub]), ""])
