"""`perfcast diffusion`: text-to-image latency of a latent-diffusion pipeline on one GPU."""

from __future__ import annotations

from typing import Annotated

import typer

from perfcast.api import DiffusionRequest, DiffusionResult, run
from perfcast.cli._common import (
    CalibrationOption,
    JsonOption,
    KernelModelOption,
    cli_options,
    emit,
    guarded,
)
from perfcast.cli._console import Table, new_console
from perfcast.compose import Execution

__all__ = ["diffusion"]


@guarded
def diffusion(
    model: Annotated[str, typer.Option(help="Diffusion pipeline from the catalog.")] = (
        "sdxl-base"),
    gpu: Annotated[str | None, typer.Option(help="Catalog GPU name (see `hardware list`).")] = (
        None),
    steps: Annotated[int, typer.Option(help="Denoising steps (UNet calls).")] = 30,
    resolution: Annotated[int, typer.Option(help="Square image edge in pixels.")] = 1024,
    height: Annotated[int | None, typer.Option(help="Image height (default: --resolution).")] = (
        None),
    width: Annotated[int | None, typer.Option(help="Image width (default: --resolution).")] = (
        None),
    batch: Annotated[int, typer.Option(help="Images generated together.")] = 1,
    guidance: Annotated[bool, typer.Option(
        "--guidance/--no-guidance", help="Classifier-free guidance (UNet batch x2).")] = True,
    negative_prompt: Annotated[bool, typer.Option(
        "--negative-prompt/--no-negative-prompt",
        help="Encode a negative prompt (else SDXL uses zero embeddings).")] = False,
    dtype: Annotated[str, typer.Option(help="fp16, bf16 or fp32.")] = "fp16",
    execution: Annotated[Execution, typer.Option(help="Kernel launch mode.")] = Execution.EAGER,
    kernel_model: KernelModelOption = "calibrated",
    calibration: CalibrationOption = None,
    json_out: JsonOption = False,
) -> None:
    """Forecast latency per image: text encoders + steps x UNet + VAE decode."""
    emit(run(DiffusionRequest.from_options(cli_options(locals()))), json_out, _print)


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
