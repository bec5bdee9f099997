"""Seconds per operator on a device: roofline, wave quantisation and fitted efficiency."""

from perfcast.kernels._calibration import (
    CROSS_GENERATION,
    SCHEMA_VERSION,
    TARGET_MEASURED,
    UNMODELLED_FAMILIES,
    Calibration,
    PhysicsModel,
    add_target_corrections,
    default_time_model,
    fit_calibration,
    measurement_ops,
    shipped_calibration,
)
from perfcast.kernels._moe import ExpertLoad, expert_load
from perfcast.kernels._roofline import (
    EfficiencyModel,
    ExecutionTimeModel,
    RooflineModel,
    UnitEfficiency,
    peak_flops,
    roofline_times,
    thread_blocks,
    wave_quantization,
)
from perfcast.kernels._uncertainty import UNCERTAINTY_TIERS, family_uncertainty, step_interval

__all__ = [
    "CROSS_GENERATION", "SCHEMA_VERSION", "TARGET_MEASURED", "UNCERTAINTY_TIERS",
    "UNMODELLED_FAMILIES", "Calibration", "ExpertLoad", "expert_load", "family_uncertainty",
    "step_interval", "EfficiencyModel",
    "ExecutionTimeModel", "PhysicsModel", "RooflineModel", "UnitEfficiency",
    "add_target_corrections", "default_time_model", "fit_calibration", "measurement_ops",
    "peak_flops",
    "roofline_times", "shipped_calibration", "thread_blocks", "wave_quantization",
]
