"""Seconds per operator on a device: roofline, wave quantisation and fitted efficiency."""

from perfcast.kernels._calibration import (
    CROSS_GENERATION,
    KERNEL_SOURCES,
    SCHEMA_VERSION,
    TARGET_MEASURED,
    UNMODELLED_FAMILIES,
    Calibration,
    KernelSource,
    PhysicsModel,
    add_target_corrections,
    calibration_devices,
    default_time_model,
    devices_by_family,
    fit_calibration,
    kernel_source,
    measurement_ops,
    shipped_calibration,
)
from perfcast.kernels._learned import (
    LEARNED,
    LearnedKernels,
    LearnedTimeModel,
    add_learned_targets,
    fit_learned,
    kernel_features,
    learned_time_model,
    shipped_learned,
)
from perfcast.kernels._moe import ExpertLoad, expert_load
from perfcast.kernels._roofline import (
    EfficiencyModel,
    ExecutionTimeModel,
    NotedTimeModel,
    RooflineModel,
    UnitEfficiency,
    model_notes,
    peak_flops,
    roofline_times,
    thread_blocks,
    wave_quantization,
)
from perfcast.kernels._stack import (
    KERNEL_FAMILIES,
    StackTimeModel,
    family_provenance,
    source_time_model,
    stack_families,
    stack_kernel_model,
)
from perfcast.kernels._uncertainty import UNCERTAINTY_TIERS, family_uncertainty, step_interval

__all__ = [
    "CROSS_GENERATION", "KERNEL_SOURCES", "SCHEMA_VERSION", "TARGET_MEASURED",
    "UNCERTAINTY_TIERS", "KernelSource", "calibration_devices", "devices_by_family",
    "kernel_source",
    "UNMODELLED_FAMILIES", "Calibration", "ExpertLoad", "expert_load", "family_uncertainty",
    "step_interval", "EfficiencyModel",
    "ExecutionTimeModel", "PhysicsModel", "RooflineModel", "UnitEfficiency",
    "add_target_corrections", "default_time_model", "fit_calibration", "measurement_ops",
    "peak_flops",
    "roofline_times", "shipped_calibration", "thread_blocks", "wave_quantization",
    "KERNEL_FAMILIES", "StackTimeModel", "family_provenance", "source_time_model",
    "stack_families", "stack_kernel_model", "NotedTimeModel", "model_notes",
    "LEARNED", "LearnedKernels", "LearnedTimeModel", "add_learned_targets", "fit_learned",
    "kernel_features", "learned_time_model", "shipped_learned",
]
