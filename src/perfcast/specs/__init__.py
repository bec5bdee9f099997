"""Validated, frozen descriptions of hardware, models, precisions and parallel plans."""

from perfcast.specs._catalog import (
    cluster_for,
    cluster_names,
    device_names,
    get_cluster,
    get_device,
    get_model,
    load_model_config,
    model_entries,
    model_names,
)
from perfcast.specs._cluster import Cluster, Link, LinkKind
from perfcast.specs._device import Device
from perfcast.specs._diffusers import (
    DiffusionPipelineSpec,
    TextEncoderConfig,
    UNetConfig,
    VAEConfig,
    diffusion_model_entries,
    diffusion_model_names,
    get_diffusion_model,
)
from perfcast.specs._dtype import DType, bytes_per_element, parse_dtype
from perfcast.specs._model import (
    LinearMixerSpec,
    MLASpec,
    ModelSpec,
    MoESpec,
    SparseAttentionSpec,
)
from perfcast.specs._plan import ParallelPlan, PipelineSchedule
from perfcast.specs._precision import Precision
from perfcast.specs._stack import (
    AttentionBackend,
    GraphCapture,
    HostModel,
    Stack,
    get_stack,
    stack_names,
)
from perfcast.specs._vision import VisionSpec

__all__ = [
    "Cluster", "DType", "Device", "Link", "LinkKind", "LinearMixerSpec", "MLASpec",
    "ModelSpec", "MoESpec", "SparseAttentionSpec",
    "ParallelPlan", "PipelineSchedule", "Precision", "bytes_per_element", "cluster_for",
    "cluster_names", "device_names", "get_cluster", "get_device", "get_model",
    "load_model_config", "model_entries", "model_names", "parse_dtype", "VisionSpec",
    "DiffusionPipelineSpec", "TextEncoderConfig", "UNetConfig", "VAEConfig",
    "diffusion_model_entries", "diffusion_model_names", "get_diffusion_model",
    "AttentionBackend", "GraphCapture", "HostModel", "Stack", "get_stack", "stack_names",
]
