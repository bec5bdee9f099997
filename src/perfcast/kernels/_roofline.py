"""Seconds per kernel: roofline x wave quantisation / efficiency, vectorised over an op table."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import pandas as pd

from perfcast.ops import COMM_FAMILIES, TENSOR_FAMILIES
from perfcast.specs import Device, DType

__all__ = [
    "EfficiencyModel", "ExecutionTimeModel", "RooflineModel", "UnitEfficiency", "peak_flops",
    "roofline_times", "wave_quantization",
]

# Output tile (rows x cols) per family for counting thread blocks: CUTLASS/cuBLAS default GEMM
# tiles are 128x128 (64x128 for skinny M); FlashAttention-2 uses 128-query blocks; split-KV
# decode (FlashDecoding) splits each sequence's keys into 256-key chunks; vector kernels handle
# 1024 threads x 4 elements per block.
_GEMM_TILE_N = 128.0
_ATTN_Q_BLOCK = 128.0
_DECODE_KEY_SPLIT = 256.0
_VECTOR_BLOCK_ELEMS = 4096.0


@runtime_checkable
class EfficiencyModel(Protocol):
    """η(family, shape, device) in (0, 1]: the fraction of the roofline a kernel reaches."""

    def eta(self, ops: pd.DataFrame, device: Device) -> np.ndarray: ...


@runtime_checkable
class ExecutionTimeModel(Protocol):
    """Seconds per op-table row on a device (collective rows are priced by the comm layer)."""

    def kernel_times(self, ops: pd.DataFrame, device: Device) -> np.ndarray: ...


class UnitEfficiency:
    """η = 1 everywhere: the plain roofline. The kernel-efficiency layer replaces it."""

    def eta(self, ops: pd.DataFrame, device: Device) -> np.ndarray:
        return np.ones(len(ops))


def peak_flops(dtypes: pd.Series | np.ndarray, families: pd.Series | np.ndarray,
               device: Device) -> np.ndarray:
    """Peak FLOP/s per row: tensor-core peak of the row's dtype for matmul families, the
    vector (fp32) rate for the rest."""
    dtypes = np.asarray(dtypes, dtype=object)
    tensor = np.isin(np.asarray(families, dtype=object), list(TENSOR_FAMILIES))
    vector_peak = device.dense_peak_flops.get(DType.FP32) or min(device.dense_peak_flops.values())
    out = np.full(len(dtypes), vector_peak, dtype=float)
    for dtype in np.unique(dtypes[tensor]):
        out[tensor & (dtypes == dtype)] = device.peak_flops(dtype)
    return out


def _tiles(ops: pd.DataFrame) -> np.ndarray:
    fam = ops["family"].to_numpy(dtype=object)
    b, m, n = (ops[c].to_numpy(dtype=float) for c in ("b", "m", "n"))
    gemm_tile_m = np.where(m >= 128, 128.0, 64.0)
    tiles = np.ceil(np.maximum(m * n, 1.0) / _VECTOR_BLOCK_ELEMS)
    tiles = np.where(fam == "gemm", b * np.ceil(m / gemm_tile_m) * np.ceil(n / _GEMM_TILE_N),
                     tiles)
    tiles = np.where(fam == "attn_prefill", b * np.ceil(m / _ATTN_Q_BLOCK), tiles)
    tiles = np.where(fam == "attn_decode", b * np.ceil(n / _DECODE_KEY_SPLIT), tiles)
    return np.maximum(tiles, 1.0)


def wave_quantization(ops: pd.DataFrame, device: Device) -> np.ndarray:
    """u = ceil(tiles / N_SM) * N_SM / tiles >= 1: idle SM slots in the last wave."""
    tiles = _tiles(ops)
    sms = float(device.sm_count)
    return np.ceil(tiles / sms) * sms / tiles


def roofline_times(ops: pd.DataFrame, device: Device, waves: bool = True) -> np.ndarray:
    """max(FLOPs / peak x u, bytes / bandwidth) per row; the waves factor wastes compute
    slots only, since a partly idle GPU can still saturate memory bandwidth."""
    compute = ops["flops"].to_numpy(dtype=float) / peak_flops(ops["dtype"], ops["family"], device)
    if waves:
        compute = compute * wave_quantization(ops, device)
    traffic = ops["bytes_read"].to_numpy(dtype=float) + ops["bytes_written"].to_numpy(dtype=float)
    return np.maximum(compute, traffic / device.hbm_bandwidth_bps)


class RooflineModel:
    """t = roofline(F, B) x wave quantisation / η; zero for collective rows."""

    def __init__(self, efficiency: EfficiencyModel | None = None, waves: bool = True):
        self.efficiency = efficiency or UnitEfficiency()
        self.waves = waves

    def kernel_times(self, ops: pd.DataFrame, device: Device) -> np.ndarray:
        eta = np.clip(self.efficiency.eta(ops, device), 1e-6, 1.0)  # never beat the roofline
        times = roofline_times(ops, device, self.waves) / eta
        comm = np.isin(ops["family"].to_numpy(dtype=object), list(COMM_FAMILIES))
        return np.where(comm, 0.0, times)
