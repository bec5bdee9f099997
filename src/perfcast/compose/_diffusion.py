"""Text-to-image latency of a latent-diffusion pipeline (SDXL) on one GPU.

latency = text encoders + steps x (sampler elementwise + UNet) + VAE decode, each priced
from its op table (perfcast.ops) by the kernel model and composed by `step_time` (eager
PyTorch by default, as diffusers runs). Classifier-free guidance runs the UNet on 2 x batch
latents (unconditional + text-conditioned in one call). diffusers decodes in fp32 when the
pipeline is fp16 and the VAE config says `force_upcast` (SDXL's VAE overflows in fp16).
With guidance and no negative prompt SDXL (`force_zeros_for_empty_prompt`) uses zero
embeddings for the unconditional half, so the text encoders run once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from perfcast.compose._step import Execution, StepForecast, step_time
from perfcast.errors import InputError
from perfcast.kernels import ExecutionTimeModel
from perfcast.ops import scheduler_ops, text_encoder_ops, unet_ops, vae_decode_ops, weight_params
from perfcast.specs import (
    Cluster,
    DiffusionPipelineSpec,
    DType,
    bytes_per_element,
    cuda_total_bytes,
    parse_dtype,
)

__all__ = ["DIFFUSION_DTYPES", "DiffusionForecast", "forecast_diffusion", "vae_dtype"]

DIFFUSION_DTYPES = ("fp16", "bf16", "fp32")


@dataclass(frozen=True)
class DiffusionForecast:
    """One pipeline call of `batch` images; every image arrives at `latency_s`."""

    latency_s: float
    text_encode_s: float
    unet_step_s: float
    unet_total_s: float
    scheduler_total_s: float
    vae_decode_s: float
    batch: int
    steps: int
    unet_batch: int
    unet_flops_per_step: float
    vae_decode_flops: float
    unet_params: float
    weights_bytes: float
    activation_peak_bytes: float
    vae_dtype: str
    unet: StepForecast
    vae: StepForecast
    interval_s: tuple[float, float] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def time_per_image_s(self) -> float:
        return self.latency_s / self.batch

    def as_dict(self) -> dict:
        """Unit-suffixed summary (the CLI's --json keys)."""
        low_high = None if self.interval_s is None else {
            "low": self.interval_s[0], "high": self.interval_s[1], "level": 0.9}
        return {
            "latency_s": self.latency_s, "time_per_image_s": self.time_per_image_s,
            "images_per_s": self.batch / self.latency_s,
            "text_encode_s": self.text_encode_s, "unet_step_s": self.unet_step_s,
            "unet_total_s": self.unet_total_s, "scheduler_total_s": self.scheduler_total_s,
            "vae_decode_s": self.vae_decode_s, "latency_interval_s": low_high,
            "steps": self.steps, "unet_batch": self.unet_batch,
            "unet_gflops_per_step": self.unet_flops_per_step / 1e9,
            "vae_decode_gflops": self.vae_decode_flops / 1e9,
            "unet_params": self.unet_params, "vae_dtype": self.vae_dtype,
            "memory_bytes": {"weights_bytes": self.weights_bytes,
                             "activation_peak_bytes": self.activation_peak_bytes,
                             "total_bytes": self.weights_bytes + self.activation_peak_bytes},
            "unet_by_family_s": _by_family(self.unet), "vae_by_family_s": _by_family(self.vae),
            "notes": self.notes,
        }


def _by_family(step: StepForecast) -> dict[str, float]:
    return {str(r.family): float(r.total_s) for r in step.by("family").itertuples()}


def vae_dtype(spec: DiffusionPipelineSpec, dtype: DType) -> DType:
    """The dtype diffusers decodes in: fp32 for an fp16 pipeline whose VAE forces upcast."""
    return DType.FP32 if dtype == DType.FP16 and spec.vae.force_upcast else dtype


def _check(spec: DiffusionPipelineSpec, resolution: tuple[int, int], steps: int,
           batch: int) -> None:
    step = spec.resolution_multiple
    for name, value in (("steps", steps), ("batch", batch)):
        if int(value) != value or value < 1:
            raise InputError(name, f"must be a whole number >= 1, got {value}", ">= 1")
    for edge in resolution:
        if int(edge) != edge or edge < step or edge % step:
            raise InputError(
                "resolution", f"{edge} px is not a multiple of {step} (the VAE's "
                f"{spec.vae.scale_factor}x times 2^{spec.unet.downsamples} UNet downsamplings)",
                f"multiples of {step}, e.g. {spec.default_resolution}")


def _interval(parts: list[tuple[StepForecast, float]]) -> tuple[float, float] | None:
    """Parts' 90% intervals summed as fully correlated (one kernel model priced them all)."""
    if any(p.interval_s is None or not p.time_s for p, _ in parts):
        return None
    return (sum(p.interval_s[0] * n for p, n in parts),
            sum(p.interval_s[1] * n for p, n in parts))


def _peak_activation(*tables: pd.DataFrame) -> float:
    """The largest kernel's tensors (inputs and output, weights excluded): a lower bound on
    the live activations at that point."""
    best = 0.0
    for ops in tables:
        e = ops["dtype"].map(bytes_per_element)
        weights = (ops["family"] == "gemm") * ops["n"] * ops["k"] * e
        best = max(best, float((ops["bytes_read"] + ops["bytes_written"] - weights).max()))
    return best


def forecast_diffusion(spec: DiffusionPipelineSpec, cluster: Cluster, *, steps: int = 30,
                       resolution: int | tuple[int, int] = 1024, batch: int = 1,
                       guidance: bool = True, negative_prompt: bool = False,
                       dtype: DType | str = "fp16",
                       execution: Execution | str = Execution.EAGER,
                       time_model: ExecutionTimeModel | None = None) -> DiffusionForecast:
    """Latency of one text-to-image call of `batch` images at `resolution` (px, or (h, w))
    with `steps` denoising steps on `cluster`'s first GPU (see module docstring)."""
    res = (resolution, resolution) if isinstance(resolution, int) else tuple(resolution)
    _check(spec, res, steps, batch)
    dt = parse_dtype(dtype)
    if dt.value not in DIFFUSION_DTYPES:
        raise InputError("dtype", f"{dt.value} diffusion is not modelled", DIFFUSION_DTYPES)
    latent = (res[0] // spec.vae.scale_factor, res[1] // spec.vae.scale_factor)
    unet_batch = batch * (2 if guidance else 1)
    dv = vae_dtype(spec, dt)

    def price(ops: pd.DataFrame) -> StepForecast:
        return step_time(ops, cluster, execution, 0.0, time_model)

    tf32 = DType.TF32 in cluster.device.dense_peak_flops
    unet_table = unet_ops(spec.unet, unet_batch, latent, dt, tf32=tf32)
    vae_table = vae_decode_ops(spec.vae, batch, latent, dv, tf32=tf32)
    unet, vae = price(unet_table), price(vae_table)
    sched = price(scheduler_ops(batch, spec.unet.in_channels, latent, guidance, dt))
    calls = 2 if guidance and (negative_prompt or not spec.force_zeros_for_empty_prompt) else 1
    texts = [price(text_encoder_ops(te, batch, dt)) for te in spec.text_encoders]
    text_s = calls * sum(t.time_s for t in texts)
    total = text_s + steps * (unet.time_s + sched.time_s) + vae.time_s
    e, unet_params = bytes_per_element(dt), weight_params(unet_table)
    text_params = sum(weight_params(text_encoder_ops(te, 1, dt)) + te.hidden_size * (
        te.vocab_size + te.max_position_embeddings) for te in spec.text_encoders)
    weights = (unet_params + text_params) * e + weight_params(vae_table) * bytes_per_element(
        "fp32" if dv == DType.FP32 else dv)
    peak = _peak_activation(unet_table, vae_table)
    capacity = cuda_total_bytes(cluster.device)[0]
    if weights + peak > capacity:
        raise InputError("memory", f"needs {(weights + peak) / 1e9:.1f} GB (weights "
                         f"{weights / 1e9:.1f}, largest kernel's tensors {peak / 1e9:.1f}) but "
                         f"{cluster.device.name} has {capacity / 1e9:.1f} GB CUDA-visible",
                         "a smaller --batch or --resolution")
    notes = [f"VAE decodes in {dv.value} (force_upcast)" if dv != dt else "",
             "text encoders run once: zero unconditional embeddings "
             "(force_zeros_for_empty_prompt)" if guidance and calls == 1 else "",
             "weights: UNet, text encoders and VAE decoder (the unused VAE encoder and "
             "the tokenizers are not counted)",
             "latency leaves out tokenisation, the image's copy to the host and its PIL "
             "conversion (CPU work)"]
    return DiffusionForecast(
        latency_s=total, text_encode_s=text_s, unet_step_s=unet.time_s,
        unet_total_s=steps * unet.time_s, scheduler_total_s=steps * sched.time_s,
        vae_decode_s=vae.time_s, batch=batch, steps=steps, unet_batch=unet_batch,
        unet_flops_per_step=float((unet_table["flops"] * unet_table["count"]).sum()),
        vae_decode_flops=float((vae_table["flops"] * vae_table["count"]).sum()),
        unet_params=unet_params, weights_bytes=weights,
        activation_peak_bytes=peak, vae_dtype=dv.value,
        unet=unet, vae=vae,
        interval_s=_interval([(t, calls) for t in texts] + [(unet, steps), (sched, steps),
                                                            (vae, 1)]),
        notes=[n for n in notes if n])
