"""One accelerator's spec sheet: the numbers every cost model reads."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from perfcast.errors import InputError
from perfcast.specs._dtype import DType

__all__ = ["Device"]

# Kernel families whose math runs on the vector units, not tensor cores, use this dtype's peak.
VECTOR_DTYPE = DType.FP32


class Device(BaseModel):
    """A GPU (or CPU) as its vendor specifies it. SI units; dense (non-sparse) peaks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: Literal["gpu", "cpu"] = "gpu"
    vendor: str
    arch: str
    sm_count: int = Field(gt=0, description="SMs (NVIDIA), compute units (AMD), cores (CPU)")
    boost_clock_hz: float | None = Field(default=None, gt=0)
    dense_peak_flops: dict[DType, float] = Field(
        description="dense peak FLOP/s (OP/s for int) per math dtype"
    )
    matrix_peak_flops: dict[DType, float] = Field(
        default_factory=dict,
        description="matrix-unit peak where it differs from dense_peak_flops for a dtype "
        "(AMD CDNA runs FP32 GEMMs on MFMA at twice the vector rate); GEMMs and attention use it")
    hbm_capacity_bytes: float = Field(gt=0)
    hbm_bandwidth_bps: float = Field(gt=0, description="device-memory bandwidth, bytes/s")
    l2_bytes: float | None = Field(default=None, gt=0)
    l2_bandwidth_bps: float | None = Field(
        default=None, gt=0, description="streaming bandwidth when the working set fits in L2")
    smem_per_sm_bytes: float | None = Field(default=None, gt=0)
    tdp_w: float | None = Field(default=None, gt=0)
    nvlink_bandwidth_bps: float | None = Field(
        default=None, gt=0, description="GPU-to-GPU link bandwidth per direction, bytes/s"
    )
    pcie_bandwidth_bps: float | None = Field(default=None, gt=0)
    kernel_launch_overhead_s: float = Field(default=4e-6, ge=0)
    sources: dict[str, str] = Field(default_factory=dict, description="field -> where it came from")

    @field_validator("dense_peak_flops")
    @classmethod
    def _positive_peaks(cls, peaks: dict[DType, float]) -> dict[DType, float]:
        if not peaks:
            raise ValueError("at least one dtype peak is required")
        for dtype, flops in peaks.items():
            if not flops > 0:
                raise ValueError(f"peak for {dtype} must be > 0, got {flops}")
        return peaks

    @property
    def dtypes(self) -> list[str]:
        """The math dtypes this device has a peak for."""
        return [d.value for d in DType if d in self.dense_peak_flops]

    def memory_bandwidth_bps(self, traffic_bytes: np.ndarray) -> np.ndarray:
        """Bandwidth per kernel: L2's when its whole traffic fits in L2 and the spec gives an
        L2 rate (measured CPUs), else device memory's (a two-level roofline)."""
        traffic = np.asarray(traffic_bytes, dtype=float)
        if self.l2_bandwidth_bps is None or self.l2_bytes is None:
            return np.full(traffic.shape, self.hbm_bandwidth_bps)
        return np.where(traffic <= self.l2_bytes, self.l2_bandwidth_bps, self.hbm_bandwidth_bps)

    def peak_flops(self, dtype: DType | str, field: str = "dtype") -> float:
        """Dense peak FLOP/s for a math dtype; an InputError when the device has none."""
        dtype = DType(dtype)
        if dtype not in self.dense_peak_flops:
            raise InputError(field, f"{self.name} has no {dtype.value} peak", self.dtypes)
        return self.dense_peak_flops[dtype]
