"""`diffusion`: text-to-image latency of a latent-diffusion pipeline on one GPU (text encoders
+ steps x UNet + VAE decode)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field

from perfcast import __version__
from perfcast.api._base import Group, Request, register
from perfcast.api._choices import KernelChoice
from perfcast.api._units import MAX_BATCH
from perfcast.compose import Execution
from perfcast.errors import InputError
from perfcast.specs import (
    Cluster,
    DiffusionPipelineSpec,
    cluster_for,
    get_device,
    get_diffusion_model,
)

if TYPE_CHECKING:  # the pricing layers load when a request runs, not for `diffusion --help`
    from perfcast.compose import DiffusionForecast
    from perfcast.kernels import ExecutionTimeModel

MAX_PIXELS = 65_536  # an image edge: 8x the largest latent-diffusion outputs
DEFAULT_EDGE_PX = 1024  # the square edge when neither --resolution nor a side is given

__all__ = ["DiffusionImage", "DiffusionRequest", "DiffusionResult", "DiffusionSampler",
           "ResolvedDiffusion"]


class DiffusionImage(Group):
    """The images one call generates."""

    resolution: int | None = Field(None, ge=1, le=MAX_PIXELS, description="Square image edge "
                                   f"in pixels (default {DEFAULT_EDGE_PX}).")
    height: int | None = Field(None, ge=1, le=MAX_PIXELS, description="Image height (default: "
                               "--resolution).")
    width: int | None = Field(None, ge=1, le=MAX_PIXELS, description="Image width (default: "
                              "--resolution).")
    batch: int = Field(1, ge=1, le=MAX_BATCH, description="Images generated together.")

    def size(self) -> tuple[int, int]:
        """(height, width) in pixels: each side given, else --resolution, else the default
        edge. --resolution beside both sides would be unread, so it is refused whatever its
        value (the default's value too: it is told apart from the default by being given)."""
        if self.resolution is not None and self.height is not None and self.width is not None:
            raise InputError("resolution", f"--resolution {self.resolution} with both --height "
                             f"{self.height} and --width {self.width}: give the square edge or "
                             "the two sides", "one of them")
        edge = DEFAULT_EDGE_PX if self.resolution is None else self.resolution
        return (edge if self.height is None else self.height,
                edge if self.width is None else self.width)


class DiffusionSampler(Group):
    """The denoising loop and its prompts."""

    steps: int = Field(30, ge=1, le=10_000, description="Denoising steps (UNet calls).")
    guidance: bool = Field(True, description="Classifier-free guidance (UNet batch x2).")
    negative_prompt: bool = Field(False, description="Encode a negative prompt (else SDXL "
                                  "uses zero embeddings).")


class DiffusionRequest(Request):
    """Latency per image of a text-to-image call on one GPU."""

    command = "diffusion"
    model: str = Field("sdxl-base", description="Diffusion pipeline from the catalog.")
    gpu: str | None = Field(None, description="Catalog GPU name (see `hardware list`).")
    image: DiffusionImage = DiffusionImage()
    sampler: DiffusionSampler = DiffusionSampler()
    dtype: str = Field("fp16", description="fp16, bf16 or fp32.")
    execution: Execution = Field(Execution.EAGER, description="Kernel launch mode.")
    kernels: KernelChoice = KernelChoice()


@dataclass(frozen=True)
class ResolvedDiffusion:
    request: DiffusionRequest
    pipeline: DiffusionPipelineSpec
    machines: Cluster
    size: tuple[int, int]
    time_model: ExecutionTimeModel
    kernel_info: dict[str, Any]


def resolve_diffusion(request: DiffusionRequest) -> ResolvedDiffusion:
    if request.gpu is None:
        raise InputError("gpu", "give --gpu", "see `perfcast hardware list`")
    spec = get_diffusion_model(request.model)
    box = cluster_for(get_device(request.gpu), 1)
    time_model, info = request.kernels.resolve(box.device)
    return ResolvedDiffusion(request, spec, box, request.image.size(), time_model, info)


@dataclass(frozen=True)
class DiffusionResult:
    request: DiffusionRequest
    inputs: dict[str, Any]
    forecast: DiffusionForecast

    def payload(self) -> dict[str, Any]:
        return {"perfcast_version": __version__, "inputs": self.inputs,
                **self.forecast.as_dict()}


def execute_diffusion(r: ResolvedDiffusion) -> DiffusionResult:
    from perfcast.compose import forecast_diffusion

    req, s = r.request, r.request.sampler
    fc = forecast_diffusion(r.pipeline, r.machines, steps=s.steps, resolution=r.size,
                            batch=req.image.batch, guidance=s.guidance,
                            negative_prompt=s.negative_prompt, dtype=req.dtype,
                            execution=req.execution, time_model=r.time_model)
    inputs = {"model": r.pipeline.name, "gpu": r.machines.device.name, "steps": s.steps,
              "height_px": r.size[0], "width_px": r.size[1], "batch": req.image.batch,
              "guidance": s.guidance, "negative_prompt": s.negative_prompt, "dtype": req.dtype,
              "execution": str(req.execution), "kernel_model": r.kernel_info}
    return DiffusionResult(req, inputs, fc)


register(DiffusionRequest, resolve_diffusion, execute_diffusion)
