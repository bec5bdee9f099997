"""`perfcast infer`: one request (or a static batch) on one GPU or a TP group."""

from __future__ import annotations

from typing import Annotated

import typer

from perfcast.api import InferRequest, InferResult
from perfcast.cli._common import (
    CalibrationMismatchOption,
    CalibrationOption,
    FormatOption,
    HostSpeedOption,
    JsonOption,
    KernelModelOption,
    StackHostOption,
    StackOption,
    answer,
    guarded,
)
from perfcast.cli._console import (
    Table,
    calibration_lines,
    in_panel,
    new_console,
    stack_summary,
)
from perfcast.compose import Execution

# Help panels after the model, hardware and parallelism (typer's "Options").
WORKLOAD, PRECISION, KERNELS, OUTPUT = "Workload", "Precision", "Kernels and engine", "Output"
Host = in_panel(StackHostOption, KERNELS)
HostSpeed = in_panel(HostSpeedOption, KERNELS)
KernelModel = in_panel(KernelModelOption, KERNELS)
Calibration = in_panel(CalibrationOption, KERNELS)
CalibrationMismatch = in_panel(CalibrationMismatchOption, KERNELS)
Json = in_panel(JsonOption, OUTPUT)
Format = in_panel(FormatOption, OUTPUT)


def _print(result: InferResult) -> None:
    f, inputs = result.forecast, result.inputs
    km = inputs["kernel_model"]
    tier = f", {km['tier']} tier" if "tier" in km else ""
    gpus = inputs["tp"] * inputs["cp"]
    cp = f", tp={inputs['tp']} cp={inputs['cp']}" if inputs["cp"] > 1 else ""
    summary = Table(title=f"{inputs['model']} on {gpus}x {inputs['gpu']}{cp} "
                    f"(kernels: {km['name']}{tier})")
    summary.add_column("metric")
    summary.add_column("value", justify="right")
    tpot = "-" if f.tpot_s is None else f"{f.tpot_s * 1e3:.3f} ms"
    for name, value in (("TTFT", f"{f.ttft_s * 1e3:.3f} ms"), ("TPOT", tpot),
                        ("end-to-end", f"{f.e2e_s * 1e3:.1f} ms"),
                        ("throughput", f"{f.throughput_tok_s:,.1f} tok/s")):
        summary.add_row(name, value)
    if f.vision is not None:
        summary.add_row("  of TTFT: vision encode", f"{f.vision_encode_s * 1e3:.3f} ms")
        summary.add_row("image tokens", f"{f.image_tokens:,}")
    if f.context_parallel is not None:
        c = f.context_parallel
        summary.add_row("CP prompt tokens per GPU", f"{c.tokens_per_rank:,}")
        summary.add_row("CP KV ring sent per GPU", f"{c.kv_ring_bytes / 1e9:.2f} GB")
        summary.add_row("CP KV ring time (exposed)",
                        f"{c.ring_s * 1e3:.3f} ms ({c.ring_exposed_s * 1e3:.3f} ms)")
        summary.add_row("CP decode combine per step", f"{c.decode_combine_s * 1e3:.3f} ms")
    for key, value in f.memory.as_dict().items():
        summary.add_row(f"memory per GPU {key.removesuffix('_bytes')}", f"{value / 1e9:.2f} GB")
    console = new_console()
    console.print(summary)
    table = Table(title="Where the time goes")
    for col in ("phase", "family", "seconds", "share"):
        table.add_column(col, justify="right" if col in ("seconds", "share") else "left")
    for row in f.breakdown().itertuples():
        table.add_row(row.phase, row.family, f"{row.total_s:.6f}", f"{row.share:.1%}")
    console.print(table)
    _print_notes(console, f.notes, km)


def _print_notes(console, notes, km: dict) -> None:
    """The forecast's notes, its stack line and what a user calibration changed."""
    for note in notes:
        console.print(f"note: {note}")
    line = stack_summary(km)
    if line:
        console.print(line)
    for line in calibration_lines(km):
        console.print(line, markup=False)


@guarded
def infer(
    model: Annotated[str | None, typer.Option(help="Catalog model name or HF id.")] = None,
    model_config: Annotated[str | None, typer.Option(help="Path to an HF config.json.")] = None,
    gpu: Annotated[str | None, typer.Option(help="Catalog GPU name (see `hardware list`).")] = None,
    cluster: Annotated[str | None, typer.Option(help="Cluster preset instead of --gpu.")] = None,
    tp: Annotated[int | None, typer.Option(help="Tensor-parallel degree.")] = None,
    num_gpus: Annotated[int | None, typer.Option(help="GPUs (= tp x cp for one request).")] = (
        None),
    cp: Annotated[int, typer.Option(help="Context-parallel degree: the prompt split over cp "
                                    "GPUs (ring attention prefill, sharded-KV decode).")] = 1,
    images: Annotated[int, typer.Option(help="Images per request (multimodal models: each "
                                        "adds its vision tokens and encoding time).",
        rich_help_panel=WORKLOAD)] = 0,
    prompt_tokens: Annotated[int, typer.Option(help="Prompt length per request.",
        rich_help_panel=WORKLOAD)] = 512,
    output_tokens: Annotated[int, typer.Option(help="Generated tokens per request.",
        rich_help_panel=WORKLOAD)] = 128,
    batch: Annotated[int, typer.Option(help="Requests run together (static batch).",
        rich_help_panel=WORKLOAD)] = 1,
    dtype: Annotated[str, typer.Option(help="Activation (and default weight) dtype.",
        rich_help_panel=PRECISION)] = "bf16",
    weight_dtype: Annotated[str | None, typer.Option(help="Weights, e.g. int4 for W4A16.",
        rich_help_panel=PRECISION)] = None,
    kv_dtype: Annotated[str | None, typer.Option(help="KV-cache dtype (default: --dtype).",
        rich_help_panel=PRECISION)] = None,
    stack: StackOption = None,
    host_speed: HostSpeed = 1.0,
    execution: Annotated[Execution | None, typer.Option(help="Kernel launch mode (default: "
                                                        "the stack's).",
        rich_help_panel=KERNELS)] = None,
    host: Host = None,
    kernel_model: KernelModel = "calibrated",
    calibration: Calibration = None,
    force_calibration: CalibrationMismatch = False,
    json_out: Json = False,
    format_out: Format = None,
) -> None:
    """Forecast TTFT, TPOT, end-to-end latency and memory of one request or a static batch."""
    answer(InferRequest, locals(), _print)
