"""Seconds per operator on a device: roofline, wave quantisation and an efficiency hook."""

from perfcast.kernels._roofline import (
    EfficiencyModel,
    ExecutionTimeModel,
    RooflineModel,
    UnitEfficiency,
    peak_flops,
    roofline_times,
    wave_quantization,
)

__all__ = [
    "EfficiencyModel", "ExecutionTimeModel", "RooflineModel", "UnitEfficiency", "peak_flops",
    "roofline_times", "wave_quantization",
]
