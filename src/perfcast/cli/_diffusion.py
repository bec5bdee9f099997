"""`perfcast diffusion`: text-to-image latency of a latent-diffusion pipeline on one GPU."""

from __future__ import annotations

from typing import Annotated

import typer

from perfcast.api import DiffusionRequest, DiffusionResult
from perfcast.cli._common import (
    CalibrationMismatchOption,
    CalibrationOption,
    FormatOption,
    JsonOption,
    KernelModelOption,
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

__all__ = ["diffusion"]


# Help panels after the pipeline, hardware and image (typer's "Options"); the kernel options
# wait for --help-all.
GUIDANCE, OUTPUT, KERNELS = "Guidance", "Output", Advanced.KERNELS
KernelModel = in_panel(KernelModelOption, KERNELS)
Calibration = in_panel(CalibrationOption, KERNELS)
CalibrationMismatch = in_panel(CalibrationMismatchOption, KERNELS)
Json = in_panel(JsonOption, OUTPUT)
Format = in_panel(FormatOption, OUTPUT)


@guarded
def diffusion(
    model: Annotated[str, typer.Option(help="Diffusion pipeline from the catalog.")] = (
        "sdxl-base"),
    gpu: Annotated[str | None, typer.Option(help="Catalog GPU name (see `hardware list`).")] = (
        None),
    steps: Annotated[int, typer.Option(help="Denoising steps (UNet calls).")] = 30,
    resolution: Annotated[int | None, typer.Option(
        help="Square image edge in pixels (default 1024).")] = None,
    height: Annotated[int | None, typer.Option(help="Image height (default: --resolution).")] = (
        None),
    width: Annotated[int | None, typer.Option(help="Image width (default: --resolution).")] = (
        None),
    batch: Annotated[int, typer.Option(help="Images generated together.")] = 1,
    dtype: Annotated[str, typer.Option(help="fp16, bf16 or fp32.")] = "fp16",
    guidance: Annotated[bool, typer.Option(
        "--guidance/--no-guidance", help="Classifier-free guidance (UNet batch x2).",
        rich_help_panel=GUIDANCE)] = True,
    negative_prompt: Annotated[bool, typer.Option(
        "--negative-prompt/--no-negative-prompt", rich_help_panel=GUIDANCE,
        help="Encode a negative prompt (else SDXL uses zero embeddings).")] = False,
    json_out: Json = False,
    format_out: Format = None,
    execution: Annotated[Execution, typer.Option(
        help="Kernel launch mode.", rich_help_panel=KERNELS)] = Execution.EAGER,
    kernel_model: KernelModel = "calibrated",
    calibration: Calibration = None,
    force_calibration: CalibrationMismatch = False,
) -> None:
    """Forecast latency per image: text encoders + steps x UNet + VAE decode."""
    answer(DiffusionRequest, locals(), _print)


def _print(result: DiffusionResult) -> None:
    fc, inputs = result.forecast, result.inputs
    t = Table(title=f"{inputs['model']} on {inputs['gpu']}: {inputs['batch']} image(s) "
              f"{inputs['height_px']}x{inputs['width_px']}, {fc.steps} steps "
              f"(kernels: {inputs['kernel_model']['name']})")
    t.add_column("metric")
    t.add_column("value", justify="right")
    for name, value in (("latency (every image of the call)", f"{fc.latency_s:.3f} s"),
                        ("time per image", f"{fc.time_per_image_s:.3f} s"),
                        ("text encoders", f"{fc.text_encode_s * 1e3:.1f} ms"),
                        (f"UNet step (batch {fc.unet_batch})", f"{fc.unet_step_s * 1e3:.1f} ms"),
                        (f"UNet x {fc.steps}", f"{fc.unet_total_s:.3f} s"),
                        ("sampler elementwise", f"{fc.scheduler_total_s * 1e3:.1f} ms"),
                        (f"VAE decode ({fc.vae_dtype})", f"{fc.vae_decode_s * 1e3:.1f} ms"),
                        ("UNet TFLOP per step", f"{fc.unet_flops_per_step / 1e12:.2f}"),
                        ("UNet parameters", f"{fc.unet_params / 1e9:.3f} B"),
                        ("weights", f"{fc.weights_bytes / 1e9:.2f} GB")):
        t.add_row(name, value)
    console = new_console()
    console.print(t)
    for note in fc.notes:
        console.print(f"note: {note}")
    km = result.payload().get("inputs", {}).get("kernel_model", {})
    for line in calibration_lines(km):
        console.print(line, markup=False)
