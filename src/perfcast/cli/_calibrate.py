"""`perfcast calibrate`: a target-measured calibration from a user's own measurements
(`perfcast.api.CalibrateRequest` does the work)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from perfcast.api import CalibrateRequest, CalibrateResult
from perfcast.cli._common import (
    FormatOption,
    JsonOption,
    answer,
    guarded,
)
from perfcast.cli._console import Table, new_console


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _logs(base: float | None, calibrated: float | None) -> str:
    """Shipped -> calibrated held-out mean |log error| (the check's second measure)."""
    return "—" if base is None or calibrated is None else f"{base:.3f} → {calibrated:.3f}"


def _print(result: CalibrateResult) -> None:
    table = Table(title=f"perfcast calibrate: {len(result.rows)} rows of {result.device.name}"
                  f" (stack {result.stack or 'none: numpy kernels'})")
    for col in ("family", "rows", "folds", "shipped held-out", "calibrated held-out",
                "in-sample", "held-out |log|", "kept"):
        table.add_column(col, justify="left" if col in ("family", "kept") else "right",
                         no_wrap=True)
    for c in result.result.checks:
        table.add_row(c.key, str(c.rows), str(c.folds), _pct(c.base_mape),
                      _pct(c.calibrated_mape), _pct(c.in_sample_mape),
                      _logs(c.base_log_error, c.calibrated_log_error), c.status)
    console = new_console()
    console.print(table)
    _print_learned(console, result)
    if result.host is not None:
        _print_host(console, result)
    for line in result.warnings():
        console.print(f"warning: {line}", markup=False)
    learned = result.learned_target["families"]
    console.print(f"wrote {result.request.outputs.out}: corrections for "
                  f"{', '.join(result.families) or 'no family'}"
                  + (f"; under --kernel-model learned for {', '.join(learned)}"
                     if learned else ""), markup=False)


def _print_learned(console, result: CalibrateResult) -> None:
    """The learned model's target tier: per family, the trees alone and with the device's
    residual on held-out folds (`--kernel-model learned --calibration FILE` uses the kept)."""
    checks = result.learned_target["checks"]
    if not checks:
        return
    table = Table(title="learned model (--kernel-model learned): the device's residual "
                  "over the shipped trees")
    for col in ("family", "rows", "trees held-out", "with residual held-out", "kept"):
        table.add_column(col, justify="left" if col in ("family", "kept") else "right",
                         no_wrap=True)
    for c in checks:
        table.add_row(c["family"], str(c["rows"]), _pct(c["learned_mape"]),
                      _pct(c["calibrated_mape"]), "residual" if c["kept"] else "trees")
    console.print(table)


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value * 1e3:,.2f}"


def _speed(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def _print_host(console, result: CalibrateResult) -> None:
    host = result.host
    how = ("fitted" if host.kept else "the stack's own: a fitted speed did not beat it on "
           "held-out steps")
    table = Table(title=f"whole steps ({host.stack}): host speed {host.host_speed:.3g} "
                  f"({how})")
    for col in ("step", "measured ms", "uncalibrated ms", "kernels calibrated ms",
                "host share", "own speed", "held-out speed", "held-out ms", "held-out error"):
        table.add_column(col, justify="left" if col == "step" else "right", no_wrap=True)
    for s in host.steps:
        shape = (f"{s['batch']}x ctx {s['context']}" if s["mode"] == "decode"
                 else f"{s['batch']}x{s['seq_len']}" if s["seq_len"] else f"{s['batch']}")
        table.add_row(f"{s['mode']} {shape}", _ms(s["measured_s"]), _ms(s["uncalibrated_s"]),
                      _ms(s["kernels_only_s"]), _pct(s["host_share"]),
                      _speed(s["own_host_speed"]), _speed(s["held_out_host_speed"]),
                      _ms(s["held_out_s"]), _pct(s["held_out_error"]))
    console.print(table)


@guarded
def calibrate(
    measurements: Annotated[Path, typer.Option(help="Measurements (.parquet/.csv, store schema).")],
    device: Annotated[str, typer.Option(help="Device the measurements are of.")],
    out: Annotated[Path, typer.Option(help="Calibration JSON to write.")],
    device_spec: Annotated[Path | None, typer.Option(
        help="Device spec JSON for a device outside the catalog.")] = None,
    stack: Annotated[str | None, typer.Option(
        help="Software stack the kernels were timed through (`perfcast stacks`); default: "
             "hf-transformers for torch-timed rows, none for numpy kernels.")] = None,
    steps: Annotated[Path | None, typer.Option(
        help="Whole steps timed by `perfcast measure --model` (<out>.steps.json), to fit the "
             "stack's host speed; default: the one beside --measurements, if any.")] = None,
    folds: Annotated[int, typer.Option(
        help="Cross-validation folds of the check against the shipped model.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed of the folds.")] = 0,
    force: Annotated[bool, typer.Option(help="Overwrite --out.")] = False,
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """Fit this device's own kernel corrections, kept where they beat the shipped model out
    of sample.

    Each family x dtype is cross-validated (k folds over shapes) against the shipped model
    on the same rows; with whole steps (`measure --model`), the stack's host speed too. Use
    the file with `--calibration FILE`."""
    answer(CalibrateRequest, locals(), _print)
