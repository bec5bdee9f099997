"""Seconds per operator on a device: roofline, wave quantisation and fitted efficiency."""

from perfcast import _lazy_exports

# Submodule -> the public names it provides, each imported on first use (PEP 562).
_EXPORTS = {
    "_calibration": ("CROSS_GENERATION", "KERNEL_SOURCES", "SCHEMA_VERSION", "TARGET_MEASURED",
        "UNMODELLED_FAMILIES", "Calibration", "KernelSource", "PhysicsModel",
        "add_target_corrections", "calibration_devices", "default_time_model",
        "devices_by_family", "fit_calibration", "kernel_source", "measurement_ops",
        "shipped_calibration"),
    "_learned": ("LEARNED", "DeviceResidual", "LearnedKernels", "LearnedTimeModel",
        "add_learned_targets", "fit_learned", "kernel_features",
        "learned_target_tier", "learned_time_model", "shipped_learned"),
    "_moe": ("ExpertLoad", "expert_load"),
    "_roofline": ("EfficiencyModel", "ExecutionTimeModel", "NotedTimeModel", "RooflineModel",
        "UnitEfficiency", "model_notes", "peak_flops", "roofline_times", "thread_blocks",
        "wave_quantization"),
    "_stack": ("KERNEL_FAMILIES", "StackTimeModel", "family_provenance", "source_time_model",
        "stack_families", "stack_kernel_model"),
    "_uncertainty": ("UNCERTAINTY_TIERS", "family_uncertainty", "step_interval"),
}
__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)

__all__ = [name for names in _EXPORTS.values() for name in names]  # pinned: tests
