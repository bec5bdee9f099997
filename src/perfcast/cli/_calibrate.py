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
from perfcast.cli._console import new_console


def _print(result: CalibrateResult) -> None:
    new_console().print(f"wrote {result.request.outputs.out}: {len(result.rows)} rows of "
                        f"{result.device.name}, in-sample MAPE {result.in_sample_mape:.1%} "
                        f"({', '.join(result.families)})", markup=False)


@guarded
def calibrate(
    measurements: Annotated[Path, typer.Option(help="Measurements (.parquet/.csv, store schema).")],
    device: Annotated[str, typer.Option(help="Device the measurements are of.")],
    out: Annotated[Path, typer.Option(help="Calibration JSON to write.")],
    device_spec: Annotated[Path | None, typer.Option(
        help="Device spec JSON for a device outside the catalog.")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite --out.")] = False,
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """Fit this device's own corrections (target-measured tier) on top of the shipped
    cross-generation parameters; use the result with `perfcast infer --calibration FILE`."""
    answer(CalibrateRequest, locals(), _print)
