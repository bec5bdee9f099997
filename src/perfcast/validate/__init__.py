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
from perfcast.validate._serving_step import validate_serving_steps

__all__ = [
    "validate_serving_steps",
    "MODEL_TARGET_MAPE", "TARGETS", "KernelSplit", "forecast_model_label", "gemm_baseline",
    "gemm_ops", "kernel_residuals", "kernel_splits", "load_gemm_slice", "load_layer_op_labels",
    "load_model_labels", "summarise", "validate_kernels", "validate_models",
]
