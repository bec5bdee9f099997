"""Kernel times composed into step times and single-request inference forecasts."""

from perfcast.compose._host import HOST_PROFILES, host_overhead_s
from perfcast.compose._inference import InferenceForecast, forecast_inference
from perfcast.compose._step import (
    EAGER_DISPATCH_S,
    Execution,
    StepForecast,
    kernel_sequence,
    step_time,
)

__all__ = [
    "EAGER_DISPATCH_S", "HOST_PROFILES", "Execution", "InferenceForecast", "StepForecast",
    "forecast_inference", "host_overhead_s", "kernel_sequence", "step_time",
]
