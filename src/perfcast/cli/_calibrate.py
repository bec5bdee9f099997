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


def _print(result: CalibrateResult) -> None:
    table = Table(title=f"perfcast calibrate: {len(result.rows)} rows of {result.device.name}"
                  f" (stack {result.stack or 'none: numpy kernels'})")
    for col in ("family", "rows", "folds", "shipped held-out", "calibrated held-out",
                "in-sample", "kept"):
        table.add_column(col, justify="left" if col in ("family", "kept") else "right",
                         no_wrap=True)
    for c in result.result.checks:
        table.add_row(c.key, str(c.rows), str(c.folds), _pct(c.base_mape),
                      _pct(c.calibrated_mape), _pct(c.in_sample_mape), c.status)
    console = new_console()
    console.print(table)
    for line in result.warnings():
        console.print(f"warning: {line}", markup=False)
    console.print(f"wrote {result.request.outputs.out}: corrections for "
                  f"{', '.join(result.families) or 'no family'}", markup=False)


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
    folds: Annotated[int, typer.Option(
        help="Cross-validation folds of the check against the shipped model.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed of the folds.")] = 0,
    force: Annotated[bool, typer.Option(help="Overwrite --out.")] = False,
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """Fit this device's own corrections and keep, family by family, those that beat the
    shipped model out of sample (k-fold); use the file with `--calibration FILE`."""
    answer(CalibrateRequest, locals(), _print)
