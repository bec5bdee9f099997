"""Image encoding of a multimodal request (LLaVA): vision tower + projector before prefill."""

from __future__ import annotations

from perfcast.comm import CollectiveModel
from perfcast.compose._step import Execution, StepForecast, step_time
from perfcast.kernels import ExecutionTimeModel
from perfcast.ops import MemoryFootprint
from perfcast.ops._vision import vision_ops
from perfcast.specs import Cluster, ModelSpec, ParallelPlan, Precision, bytes_per_element

__all__ = ["vision_step", "with_vision_weights"]


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
