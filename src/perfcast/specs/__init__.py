"""Validated, frozen descriptions of hardware, models, precisions and parallel plans."""

from perfcast import _lazy_exports

# Submodule -> the public names it provides, each imported on first use (PEP 562).
_EXPORTS = {
    "_catalog": ("cluster_for", "cluster_names", "device_names", "get_cluster", "get_device",
        "get_model", "load_model_config", "model_entries", "model_names"),
    "_cluster": ("Cluster", "Link", "LinkKind"),
    "_device": ("Device",),
    "_memory": ("cuda_total_bytes", "physical_memory_bytes"),
    "_diffusers": ("DiffusionPipelineSpec", "TextEncoderConfig", "UNetConfig", "VAEConfig",
        "diffusion_model_entries", "diffusion_model_names", "get_diffusion_model"),
    "_dtype": ("DType", "bytes_per_element", "parse_dtype"),
    "_model": ("LinearMixerSpec", "MLASpec", "ModelSpec", "MoESpec", "SparseAttentionSpec"),
    "_plan": ("ParallelPlan", "PipelineSchedule"),
    "_precision": ("Precision",),
    "_stack": ("AttentionBackend", "BatchTier", "EngineDefaults", "GraphCapture", "HostModel",
        "KVBudget", "Stack", "get_stack", "stack_names"),
    "_vision": ("VisionSpec",),
}
__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)

__all__ = [name for names in _EXPORTS.values() for name in names]  # pinned: tests
