"""Accuracy of perfcast's forecasts against shipped real measurements."""

from perfcast.validate._gemm_baseline import gemm_baseline, gemm_ops, load_gemm_slice

__all__ = ["gemm_baseline", "gemm_ops", "load_gemm_slice"]
