"""Accuracy of perfcast's forecasts against shipped real measurements."""

from perfcast.validate._gemm_baseline import gemm_baseline, gemm_ops, load_gemm_slice
from perfcast.validate._kernels import (
    TARGETS,
    KernelSplit,
    kernel_residuals,
    kernel_splits,
    summarise,
    validate_kernels,
)
from perfcast.validate._models import (
    MODEL_TARGET_MAPE,
    forecast_model_label,
    load_layer_op_labels,
    load_model_labels,
    validate_models,
)
from perfcast.validate._serving import (
    SERVING_TARGETS,
    analytic_point,
    load_serving_points,
    point_precision,
    sample_serving_points,
    serving_residuals,
    validate_serving,
)
from perfcast.validate._serving_sim import engine_point
from perfcast.validate._serving_step import validate_serving_steps

__all__ = [
    "MODEL_TARGET_MAPE", "SERVING_TARGETS", "TARGETS", "KernelSplit", "analytic_point",
    "engine_point", "forecast_model_label", "gemm_baseline", "gemm_ops", "kernel_residuals",
    "kernel_splits", "load_gemm_slice", "load_layer_op_labels", "load_model_labels",
    "load_serving_points", "point_precision", "sample_serving_points", "serving_residuals",
    "summarise", "validate_kernels", "validate_models", "validate_serving",
    "validate_serving_steps",
]
