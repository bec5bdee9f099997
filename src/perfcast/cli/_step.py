"""`perfcast step`: one forward or training iteration of a model, as eager PyTorch runs it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from perfcast.api import StepRequest, StepResult
from perfcast.cli._common import (
    CalibrationOption,
    FormatOption,
    JsonOption,
    KernelModelOption,
    answer,
    guarded,
)
from perfcast.cli._console import Advanced, Table, in_panel, new_console
from perfcast.compose import Execution

# Help panels after the model, hardware and batch (typer's "Options").
PLAN, EXECUTION, KERNELS, OUTPUT = "Plan", "Execution", Advanced.KERNELS, "Output"
KernelModel = in_panel(KernelModelOption, KERNELS)
Calibration = in_panel(CalibrationOption, KERNELS)
Json = in_panel(JsonOption, OUTPUT)
Format = in_panel(FormatOption, OUTPUT)


@guarded
def step(
    model: Annotated[str | None, typer.Option(help="Catalog model name or HF id.")] = None,
    model_config: Annotated[str | None, typer.Option(help="Path to an HF config.json.")] = None,
    gpu: Annotated[str, typer.Option(help="Catalog GPU name (see `hardware list`).")] = (
        "a100-sxm4-80gb"),
    batch: Annotated[int, typer.Option(help="Sequences in the batch (global, across dp).")] = 1,
    seq_len: Annotated[int, typer.Option(help="Tokens per sequence.")] = 512,
    mode: Annotated[str, typer.Option(help="forward or training (forward + backward).")] = (
        "forward"),
    dtype: Annotated[str, typer.Option(help="Weights, activations and math dtype.")] = "fp32",
    execution: Annotated[Execution, typer.Option(help="Kernel launch mode.",
        rich_help_panel=EXECUTION)] = Execution.EAGER,
    fused: Annotated[bool, typer.Option(help="Apply the fusion rules (torch.compile-style).",
        rich_help_panel=EXECUTION)
                     ] = False,
    recompute: Annotated[bool, typer.Option(help="Full activation recompute (training).",
        rich_help_panel=EXECUTION)
                         ] = False,
    optimizer: Annotated[str | None, typer.Option(
        help="Add the optimizer step (training): adam or sgd.", rich_help_panel=EXECUTION)] = None,
    num_gpus: Annotated[int | None, typer.Option(help="GPUs (= tp x pp x dp).",
        rich_help_panel=PLAN)] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree.", rich_help_panel=PLAN)] = 1,
    pp: Annotated[int, typer.Option(help="Pipeline stages (one micro-batch).",
        rich_help_panel=PLAN)] = 1,
    dp: Annotated[int, typer.Option(help="Data-parallel replicas (DDP).",
        rich_help_panel=PLAN)] = 1,
    kernel_model: KernelModel = "calibrated",
    calibration: Calibration = None,
    trace: Annotated[Path | None, typer.Option(
        help="Write a Chrome-trace/Perfetto JSON of the step here.",
        rich_help_panel=OUTPUT)] = None,
    json_out: Json = False,
    format_out: Format = None,
) -> None:
    """Forecast one iteration: time, 90% interval and where the time goes."""
    answer(StepRequest, locals(), _print)


def _print(result: StepResult) -> None:
    payload = result.payload()
    i = payload["inputs"]
    tier = i["kernel_model"].get("tier", i["kernel_model"]["name"])
    t = Table(title=f"{i['model']} {i['mode']} on {i['num_gpus']}x {i['gpu']} "
              f"(batch {i['batch']} x {i['seq_len']}, {i['execution']}, kernels: {tier})")
    t.add_column("metric")
    t.add_column("value", justify="right")
    iv = payload["interval_s"]
    t.add_row("step time", f"{payload['time_s'] * 1e3:.2f} ms")
    t.add_row("90% interval", f"{iv['low'] * 1e3:.2f} - {iv['high'] * 1e3:.2f} ms")
    t.add_row("kernel launches", f"{payload['kernels']:,}")
    console = new_console()
    console.print(t)
    b = Table(title="Where the time goes")
    for col in ("family", "seconds", "share"):
        b.add_column(col, justify="left" if col == "family" else "right")
    for row in result.step.by("family").itertuples():
        b.add_row(str(row.family), f"{row.total_s:.6f}", f"{row.share:.1%}")
    console.print(b)
