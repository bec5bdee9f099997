"""Kernel times composed into step times and single-request inference forecasts."""

from perfcast.compose._cnn_fusion import fuse_cnn_kernels
from perfcast.compose._diffusion import (
    DIFFUSION_DTYPES,
    DiffusionForecast,
    forecast_diffusion,
    vae_dtype,
)
from perfcast.compose._host import HOST_PROFILES, host_overhead_s
from perfcast.compose._inference import InferenceForecast, forecast_inference
from perfcast.compose._parallel import (
    DDP_BUCKET_BYTES,
    ParallelStep,
    bucketed_reduction,
    data_parallel_step,
    group_collective,
    group_view,
    pipeline_step,
    reduction_end,
)
from perfcast.compose._rag import RAGForecast, forecast_rag
from perfcast.compose._serving_step import BatchStats, ServingStepModel
from perfcast.compose._step import (
    EAGER_DISPATCH_S,
    Execution,
    StepForecast,
    TieredTimeModel,
    kernel_sequence,
    model_tier,
    step_time,
    step_times,
)
from perfcast.compose._trace import chrome_trace, step_timeline
from perfcast.compose._training import TRAINING_EXECUTION, training_step, training_step_ops

__all__ = [
    "BatchStats", "ServingStepModel",
    "DDP_BUCKET_BYTES", "EAGER_DISPATCH_S", "HOST_PROFILES", "ParallelStep",
    "data_parallel_step", "pipeline_step", "Execution", "InferenceForecast", "StepForecast",
    "chrome_trace", "forecast_inference", "fuse_cnn_kernels", "host_overhead_s",
    "kernel_sequence", "model_tier", "step_time", "step_timeline",
    "DIFFUSION_DTYPES", "DiffusionForecast", "forecast_diffusion", "vae_dtype",
    "RAGForecast", "forecast_rag",
    "TRAINING_EXECUTION", "TieredTimeModel", "bucketed_reduction", "group_collective",
    "group_view", "reduction_end", "step_times", "training_step", "training_step_ops",
]
