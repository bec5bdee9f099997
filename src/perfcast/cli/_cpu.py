"""`perfcast cpu`: scenario X5 on this machine. Calibrate the local CPU with a torch sweep of
the kernels the model launches (the target-measured tier), forecast the eager fp32 forward,
then run the same forward with torch (one thread) and report predicted vs measured, per
kernel family too (`perfcast.api.CpuRequest` does the work)."""

from __future__ import annotations

from typing import Annotated

import typer

from perfcast.api import CpuRequest, CpuResult
from perfcast.cli._common import (
    FormatOption,
    JsonOption,
    answer,
    guarded,
)
from perfcast.cli._console import Table, new_console

__all__ = ["cpu"]


def _print(result: CpuResult) -> None:
    w = result.request.workload
    table = Table(title=f"{w.model} batch {w.batch} on {result.device.arch} (1 thread, fp32): "
                  f"predicted {result.predicted_s * 1e3:.2f} ms, measured "
                  f"{result.measured_s * 1e3:.2f} ms, error {result.error:+.1%}")
    for col in ("family", "predicted ms", "kernels alone ms", "error"):
        table.add_column(col, justify="left" if col == "family" else "right")
    for family, row in result.families.items():
        err = "-" if row["error"] is None else f"{row['error']:+.1%}"
        table.add_row(family, f"{row['predicted_s'] * 1e3:.2f}",
                      f"{row['measured_alone_s'] * 1e3:.2f}", err)
    new_console().print(table)
    if not result.measured["quiet"]:
        new_console(stderr=True).print(f"note: the CPU was busy while measuring (reference "
                                   f"{result.measured['slowdown']:.2f}x slow)")


@guarded
def cpu(
    model: Annotated[str, typer.Option(help="resnet18 or small-transformer (GPT-2 124M)")] =
        "resnet18",
    batch: Annotated[int, typer.Option(help="images or sequences per forward")] = 1,
    seq_len: Annotated[int, typer.Option(help="tokens per sequence (small-transformer)")] =
        128,
    quick: Annotated[bool, typer.Option(help="short sweep and fewer retries (~10 s)")] =
        False,
    repeats: Annotated[int | None, typer.Option(help="timed forwards (median); default 5, "
                                                "3 with --quick")] = None,
    seed: Annotated[int, typer.Option(help="sweep shapes and model weights seed")] = 0,
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """Forecast a model's forward on this CPU (target-measured), then measure it (torch)."""
    answer(CpuRequest, locals(), _print)
