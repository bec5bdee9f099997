"""Image encoding of a multimodal request (LLaVA): vision tower + projector before prefill;
and the inference forward of a torchvision ResNet (scenario S7)."""

from __future__ import annotations

from dataclasses import dataclass, field

from perfcast.comm import CollectiveModel
from perfcast.compose._cnn_fusion import fuse_cnn_kernels
from perfcast.compose._step import Execution, StepForecast, step_time
from perfcast.kernels import ExecutionTimeModel, default_time_model, model_notes
from perfcast.ops import MemoryFootprint, cnn_ops
from perfcast.ops._vision import vision_ops
from perfcast.specs import Cluster, DType, ModelSpec, ParallelPlan, Precision, bytes_per_element

__all__ = ["CNNInference", "cnn_inference", "vision_step", "with_vision_weights"]


def vision_step(model: ModelSpec, images: int, precision: Precision, plan: ParallelPlan,
                cluster: Cluster, execution: Execution | str, time_model: ExecutionTimeModel,
                comm: CollectiveModel) -> StepForecast:
    """Seconds to encode `images` images and project them into the LLM's embedding space.
    The engine runs it in the same step as the prefill, before it (no host time of its own)."""
    ops = vision_ops(model, images, precision, plan)
    return step_time(ops, cluster, execution, 0.0, time_model, comm)


def with_vision_weights(memory: MemoryFootprint, model: ModelSpec, precision: Precision,
                        plan: ParallelPlan) -> MemoryFootprint:
    """The footprint plus the vision tower and projector, held in the activation dtype
    (--weight-dtype quantises the language model's layers only) and split over TP. Its
    activations are freed before the LLM's prefill, whose are larger."""
    if model.vision is None:
        return memory
    extra = model.vision.params() * bytes_per_element(precision.activations) / plan.tp
    return MemoryFootprint(weights_bytes=memory.weights_bytes + extra,
                           kv_cache_bytes=memory.kv_cache_bytes,
                           activation_bytes=memory.activation_bytes,
                           runtime_bytes=memory.runtime_bytes)


@dataclass(frozen=True)
class CNNInference:
    """One inference forward of a ResNet: the step, images/s and the kernel model's notes
    (e.g. a tensor-core conv priced with a borrowed efficiency)."""

    step: StepForecast
    images_per_s: float
    notes: list[str] = field(default_factory=list)


def cnn_inference(name: str, batch_size: int, cluster: Cluster, dtype: str = "fp32",
                  execution: Execution | str = "eager", fused: bool = False,
                  time_model: ExecutionTimeModel | None = None,
                  image_size: int = 224, *, host_s: float = 0.0,
                  dispatch_s: float | None = None,
                  host_spread: tuple[float, float] = (1.0, 1.0)) -> CNNInference:
    """The eval-mode forward of torchvision ResNet `name` (`ops.CNN_MODELS`) on `batch_size`
    images on one GPU of `cluster`, in `dtype` (fp32, its convs in TF32 where the GPU has it
    as PyTorch's cuDNN default allows; or fp16/bf16: convs on the tensor cores); `fused`
    folds batch norms and ReLUs into the convs as deployment runtimes do
    (compose.fuse_cnn_kernels). `host_s` / `dispatch_s` / `host_spread`: a stack's host
    costs and their range over hosts (step_time; None: the default eager dispatch)."""
    ops = cnn_ops(name, batch_size, image_size, precision=dtype,
                  tf32=DType.TF32 in cluster.device.dense_peak_flops)
    if fused:
        ops = fuse_cnn_kernels(ops)
    time_model = time_model or default_time_model()
    step = step_time(ops, cluster, execution, host_s, time_model, dispatch_s=dispatch_s,
                     host_spread=host_spread)
    return CNNInference(step, batch_size / step.time_s, model_notes(time_model, ops))
