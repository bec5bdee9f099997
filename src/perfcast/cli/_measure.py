"""`perfcast measure`: time the op families on this machine into a measurement file
(`perfcast.api.MeasureRequest` does the work)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from perfcast.api import MeasureRequest, MeasureResult, run
from perfcast.cli._common import (
    FormatOption,
    JsonOption,
    cli_options,
    emit,
    guarded,
    output_format,
)
from perfcast.cli._console import Table, new_console
from perfcast.cli._progress import interrupted, progress_bar
from perfcast.measure import SweepInterrupted


def _print(result: MeasureResult) -> None:
    summary, spec = result.summary, result.device_spec
    table = Table(title=f"perfcast measure: {int(summary['rows'].sum())} rows in "
                  f"{result.seconds:.1f} s")
    for col in ("family", "dtype", "rows", "GFLOP/s p50", "GFLOP/s max", "GB/s p50", "GB/s max"):
        table.add_column(col, justify="left" if col in ("family", "dtype") else "right",
                         no_wrap=True)
    for row in summary.itertuples():
        table.add_row(row.family, row.dtype, str(row.rows), f"{row.gflops_median:,.1f}",
                      f"{row.gflops_max:,.1f}", f"{row.gbs_median:,.1f}", f"{row.gbs_max:,.1f}")
    console = new_console()
    console.print(table)
    if spec is not None:
        peaks = ", ".join(f"{d} {p / 1e9:,.0f} GFLOP/s" for d, p in spec.dense_peak_flops.items())
        console.print(f"device {spec.name} ({spec.arch}): peak {peaks}; memory bandwidth "
                      f"{spec.hbm_bandwidth_bps / 1e9:,.1f} GB/s")
    console.print(f"wrote {result.path}" + (f" and {result.device_path}"
                                            if result.device_path is not None else ""))


@guarded
def measure(
    out: Annotated[Path, typer.Option("--out", help="Output file: .parquet or .csv.")],
    device: Annotated[str, typer.Option(help="What to time: cpu or cuda (torch).")] = "cpu",
    backend: Annotated[str | None, typer.Option(
        help="CPU kernels to time: numpy (the op families; the default) or torch (eager "
             "PyTorch kernels, one thread; needs the 'torch' extra). cuda is always torch.")
    ] = None,
    quick: Annotated[bool, typer.Option("--quick", help="A small sweep (seconds).")] = False,
    repeats: Annotated[int, typer.Option(help="Timed repeats per shape (median kept).")] = 5,
    seed: Annotated[int, typer.Option(help="Seed for the shape list and data.")] = 0,
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """Time gemm, elementwise, activation, softmax and norm kernels on this machine into a
    measurement file (perfcast's store schema), with the device spec in <out>.device.json."""
    request = MeasureRequest.from_options(cli_options(locals()))
    fmt = output_format(json_out, format_out)
    try:
        with progress_bar("measure: shapes", fmt == "json") as bar:
            result = run(request, progress=bar)
    except KeyboardInterrupt as stop:
        interrupted(_kept(stop))
    emit(fmt, result.payload, lambda: _print(result))


def _kept(stop: KeyboardInterrupt) -> str:
    """What Ctrl-C left: the rows timed so far in the output (no device spec), or nothing
    (stopped before the first shape, e.g. while torch loads)."""
    if not isinstance(stop, SweepInterrupted) or stop.path is None:
        return "no shape had been timed; nothing written. Rerun the same command"
    return (f"{len(stop.rows)} of {stop.planned} rows timed so far written to {stop.path} "
            "(no device spec); a rerun starts over: the same command with --force")
