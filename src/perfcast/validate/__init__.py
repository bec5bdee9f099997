"""Accuracy of perfcast's forecasts against shipped real measurements."""

from perfcast.validate._gemm_baseline import gemm_baseline, gemm_ops, load_gemm_slice
from perfcast.validate._kernels import (
    TARGETS,
    KernelSplit,
    kernel_splits,
    summarise,
    validate_kernels,
)

__all__ = [
    "TARGETS", "KernelSplit", "gemm_baseline", "gemm_ops", "kernel_splits", "load_gemm_slice",
    "summarise", "validate_kernels",
]
