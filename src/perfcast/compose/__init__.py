"""Kernel times composed into step times and single-request inference forecasts."""

from perfcast.compose._host import HOST_PROFILES, host_overhead_s
from perfcast.compose._inference import InferenceForecast, forecast_inference
from perfcast.compose._step import Execution, StepForecast, step_time

__all__ = [
    "HOST_PROFILES", "Execution", "InferenceForecast", "StepForecast", "forecast_inference",
    "host_overhead_s", "step_time",
]
