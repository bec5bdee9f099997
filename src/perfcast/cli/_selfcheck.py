"""`perfcast selfcheck`: scenario S8 on this machine: measure a model's kernels and steps,
calibrate, and check the calibration (`perfcast.api.SelfCheckRequest` does the work)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from perfcast.api import SelfCheckRequest, SelfCheckResult
from perfcast.cli._common import FormatOption, JsonOption, answer, guarded
from perfcast.cli._console import Table, new_console

__all__ = ["selfcheck"]


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1%}"


def _mape(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _print(result: SelfCheckResult) -> None:
    p = result.payload()
    console = new_console()
    fams = Table(title=f"{p['model']} on {p['device']} ({p['stack']}): kernel families, "
                 "held-out error")
    for col in ("family", "rows", "shipped", "calibrated", "kept"):
        fams.add_column(col, justify="left" if col in ("family", "kept") else "right")
    for f in p["families"]:
        fams.add_row(f["family"], str(f["rows"]), _mape(f["base_heldout_mape"]),
                     _mape(f["calibrated_heldout_mape"]), f["status"])
    console.print(fams)
    steps = Table(title=f"whole steps: host speed {p['host_speed']:.3g}; step MAPE "
                  f"uncalibrated {_mape(p['step_mape_uncalibrated'])}, calibrated (held out) "
                  f"{_mape(p['step_mape_calibrated_held_out'])}")
    for col in ("step", "runner", "measured ms", "uncalibrated", "calibrated (held out)"):
        steps.add_column(col, justify="left" if col in ("step", "runner") else "right")
    for s in p["steps"]:
        steps.add_row(s["mode"], s["runner"], f"{s['measured_s'] * 1e3:,.2f}",
                      _pct(s["uncalibrated_error"]), _pct(s["held_out_error"]))
    console.print(steps)
    for line in p["warnings"]:
        console.print(f"warning: {line}", markup=False)


@guarded
def selfcheck(
    model: Annotated[str, typer.Option(help="gpt2, gpt2-medium or resnet18.")] = "gpt2",
    device: Annotated[str, typer.Option(help="cpu, or cuda (the GPU torch sees).")] = "cpu",
    batch: Annotated[int, typer.Option(help="Sequences (images) per step.")] = 1,
    seq_len: Annotated[int | None, typer.Option(
        help="Tokens per sequence (and decode context); default 64, none for a CNN.")] = None,
    quick: Annotated[bool, typer.Option(
        help="Fewer repeats per step, on perfcast's hand-written model only.")] = False,
    seed: Annotated[int, typer.Option(help="Seed of the data and the folds.")] = 0,
    out: Annotated[Path | None, typer.Option(
        help="Folder to keep the measurements and calibration in (default: none kept).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Replace those files in --out.")] = False,
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """Measure, calibrate and check a model's steps on this machine (S8).

    `measure --model` then `calibrate`: per kernel family the held-out error before and
    after, per step the forecast without and with the calibration against the measurement."""
    answer(SelfCheckRequest, locals(), _print, progress="selfcheck")
