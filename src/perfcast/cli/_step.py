"""`perfcast step`: one forward, decode or training iteration of a model, as eager PyTorch
runs it on a software stack (default hf-transformers)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from perfcast.api import StepRequest, StepResult
from perfcast.cli._common import (
    CalibrationMismatchOption,
    CalibrationOption,
    FormatOption,
    HostSpeedOption,
    JsonOption,
    KernelModelOption,
    StackOption,
    answer,
    guarded,
)
from perfcast.cli._console import (
    Advanced,
    Table,
    calibration_lines,
    in_panel,
    new_console,
)
from perfcast.compose import Execution

# Help panels after the model, hardware and batch (typer's "Options").
PLAN, EXECUTION, KERNELS, OUTPUT = "Plan", "Execution", Advanced.KERNELS, "Output"
KernelModel = in_panel(KernelModelOption, KERNELS)
Calibration = in_panel(CalibrationOption, KERNELS)
CalibrationMismatch = in_panel(CalibrationMismatchOption, KERNELS)
Json = in_panel(JsonOption, OUTPUT)
Format = in_panel(FormatOption, OUTPUT)
Stack = in_panel(StackOption, EXECUTION)
HostSpeed = in_panel(HostSpeedOption, KERNELS)


@guarded
def step(
    model: Annotated[str | None, typer.Option(help="Catalog model name or HF id.")] = None,
    model_config: Annotated[str | None, typer.Option(help="Path to an HF config.json.")] = None,
    gpu: Annotated[str | None, typer.Option(
        help="Catalog GPU name (see `hardware list`); default a100-sxm4-80gb.")] = None,
    device_spec: Annotated[Path | None, typer.Option(
        help="Device spec JSON instead of --gpu (`perfcast measure` writes "
             "<out>.device.json).", rich_help_panel=KERNELS)] = None,
    batch: Annotated[int, typer.Option(help="Sequences in the batch (global, across dp).")] = 1,
    seq_len: Annotated[int | None, typer.Option(
        help="Tokens per sequence (default 512; a ViT's: its image's patches + CLS).")] = None,
    mode: Annotated[str, typer.Option(help="forward, training (forward + backward) or decode "
                                      "(one generate() step over --context cached tokens).")
                    ] = "forward",
    context: Annotated[int | None, typer.Option(
        help="Tokens already in the KV cache (decode only).")] = None,
    logits: Annotated[str, typer.Option(
        help="Logits of all positions (a forward) or the last (generate()).",
        rich_help_panel=KERNELS)] = "all",
    dtype: Annotated[str, typer.Option(help="Weights, activations and math dtype.")] = "fp32",
    stack: Stack = None,
    host_speed: HostSpeed = 1.0,
    execution: Annotated[Execution | None, typer.Option(
        help="Kernel launch mode (default: the stack's).", rich_help_panel=EXECUTION)] = None,
    fused: Annotated[bool | None, typer.Option(
        "--fused/--no-fused", help="Apply the fusion rules (torch.compile-style; default: "
        "the stack's).", rich_help_panel=EXECUTION)] = None,
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
    force_calibration: CalibrationMismatch = False,
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
    shape = (f"batch {i['batch']} over {i['context']} cached" if i["mode"] == "decode"
             else f"batch {i['batch']} images" if i["seq_len"] is None
             else f"batch {i['batch']} x {i['seq_len']}")
    t = Table(title=f"{i['model']} {i['mode']} on {i['num_gpus']}x {i['gpu']} "
              f"({shape}, {i['stack']}, {i['execution']}, kernels: {tier})")
    t.add_column("metric")
    t.add_column("value", justify="right")
    iv = payload["interval_s"]
    t.add_row("step time", f"{payload['time_s'] * 1e3:.2f} ms")
    t.add_row("90% interval", f"{iv['low'] * 1e3:.2f} - {iv['high'] * 1e3:.2f} ms")
    t.add_row("kernel launches", f"{payload['kernels']:,}")
    if payload.get("images_per_s") is not None:
        t.add_row("images/s", f"{payload['images_per_s']:,.1f}")
    console = new_console()
    console.print(t)
    for note in payload.get("notes", []):
        console.print(f"note: {note}")
    for line in calibration_lines(i["kernel_model"]):
        console.print(line, markup=False)
    b = Table(title="Where the time goes")
    for col in ("family", "seconds", "share"):
        b.add_column(col, justify="left" if col == "family" else "right")
    for row in result.step.by("family").itertuples():
        b.add_row(str(row.family), f"{row.total_s:.6f}", f"{row.share:.1%}")
    console.print(b)
