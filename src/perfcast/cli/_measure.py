"""`perfcast measure`: time the op families on this machine into a measurement file, or with
--model the model's own kernels plus its whole steps (`perfcast.api.MeasureRequest` does the
work)."""

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
    if result.steps is not None:
        console.print(_steps_table(result))
    written = [p for p in (result.path, result.device_path, result.steps_path) if p]
    console.print("wrote " + ", ".join(str(p) for p in written))


def _steps_table(result: MeasureResult) -> Table:
    """The whole steps timed with --model, and the kernels they launch."""
    plan, model = result.plan, result.payload()["model"]
    table = Table(title=f"{plan.model} steps on {plan.stack} ({plan.dtype}); kernel ops "
                  f"not timed: {', '.join(plan.skipped_ops) or 'none'}")
    for col in ("runner", "mode", "batch", "seq_len", "context", "kernels", "measured ms"):
        table.add_column(col, justify="left" if col in ("runner", "mode") else "right")
    for step in model["steps"]:
        table.add_row(step["runner"], step["mode"], str(step["batch"]),
                      *("-" if step[k] is None else str(step[k]) for k in ("seq_len", "context")),
                      str(step["kernels"]), f"{step['measured_s'] * 1e3:,.2f}"
                      + ("" if step["quiet"] is not False else " (busy)"))
    return table


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
    model: Annotated[str | None, typer.Option(
        help="Time this model's own kernels and whole steps (gpt2, gpt2-medium, resnet18) "
             "into <out> and <out>.steps.json.")] = None,
    model_config: Annotated[str | None, typer.Option(
        help="Path to a GPT-2-type HF config.json instead of --model.")] = None,
    stack: Annotated[str | None, typer.Option(
        help="Software stack the steps emulate: hf-transformers (the default; SDPA) or "
             "hf-transformers-legacy (eager attention).")] = None,
    batch: Annotated[int, typer.Option(help="Sequences (images) per step.")] = 1,
    seq_len: Annotated[int, typer.Option(
        help="Tokens per sequence of the forward and training steps.")] = 128,
    context: Annotated[int | None, typer.Option(
        help="Cached tokens of the decode step (default: --seq-len).")] = None,
    dtype: Annotated[str | None, typer.Option(
        help="Step dtype: fp32 on cpu; bf16 (default), fp16 or fp32 on cuda.")] = None,
    optimizer: Annotated[str, typer.Option(
        help="Training step's optimizer: adam or sgd.")] = "adam",
    modes: Annotated[str | None, typer.Option(
        help="Steps to time, comma-separated: forward, decode, training (default: all the "
             "model has).")] = None,
    runners: Annotated[str | None, typer.Option(
        help="Who runs the steps, comma-separated: perfcast (hand-written torch models), "
             "transformers (HF's own; default both when installed).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """Time kernels (with --model: a model's own and its whole steps) on this machine
    into a measurement file.

    Without --model: gemm, elementwise, activation, softmax and norm kernels (perfcast's store
    schema), with the device spec in <out>.device.json. With --model: the model's own kernels
    (perfcast's op tables for the stack), and its forward, decode and training steps timed end
    to end into <out>.steps.json."""
    request = MeasureRequest.from_options(cli_options(locals()))
    fmt = output_format(json_out, format_out)
    try:
        label = "measure: shapes" if model is None and model_config is None else \
            "measure: kernels + steps"
        with progress_bar(label, fmt == "json") as bar:
            result = run(request, progress=bar)
    except KeyboardInterrupt as stop:
        interrupted(_kept(stop))
    emit(fmt, result.payload, lambda: _print(result))


def _kept(stop: KeyboardInterrupt) -> str:
    """What Ctrl-C left: the rows timed so far in the output (no device spec), or nothing
    (stopped before the first shape, e.g. while torch loads)."""
    from perfcast.measure import SweepInterrupted  # loaded: the request ran

    if not isinstance(stop, SweepInterrupted) or stop.path is None:
        return "no shape had been timed; nothing written. Rerun the same command"
    return (f"{len(stop.rows)} of {stop.planned} rows timed so far written to {stop.path} "
            "(no device spec); a rerun starts over: the same command with --force")
