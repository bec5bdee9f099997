"""Kernel times composed into step times and single-request inference forecasts."""

from perfcast import _lazy_exports

# Submodule -> the public names it provides, each imported on first use (PEP 562).
_EXPORTS = {
    "_cnn_fusion": ("fuse_cnn_kernels",),
    "_execution": ("Execution",),
    "_diffusion": ("DIFFUSION_DTYPES", "DiffusionForecast", "forecast_diffusion", "vae_dtype"),
    "_host": ("HOST_PROFILES", "host_overhead_s"),
    "_inference": ("InferenceForecast", "forecast_inference"),
    "_parallel": ("DDP_BUCKET_BYTES", "ParallelStep", "bucketed_reduction",
        "data_parallel_step", "group_collective", "group_view", "pipeline_step",
        "reduction_end"),
    "_rag": ("RAGForecast", "forecast_rag"),
    "_serving_step": ("BatchStats", "ServingStepModel"),
    "_step": ("EAGER_DISPATCH_S", "StepForecast", "TieredTimeModel",
        "kernel_sequence", "model_tier", "step_time", "step_times"),
    "_trace": ("chrome_trace", "step_timeline"),
    "_training": ("TRAINING_EXECUTION", "EagerGraph", "training_execution", "training_step",
        "training_step_ops"),
}
__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)

__all__ = [name for names in _EXPORTS.values() for name in names]  # pinned: tests
