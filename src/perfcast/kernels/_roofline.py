"""Seconds per kernel: roofline x wave quantisation / efficiency, vectorised over an op table."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import pandas as pd

from perfcast.ops import COMM_FAMILIES, TENSOR_FAMILIES
from perfcast.specs import Device, DType

__all__ = [
    "EfficiencyModel", "ExecutionTimeModel", "MATRIX_FAMILIES", "NotedTimeModel",
    "RooflineModel", "model_notes",
    "SIMT_FP32_FAMILIES", "UnitEfficiency", "peak_flops",
    "roofline_times", "thread_blocks", "wave_quantization",
]

# Thread-block output tiles. GEMM: the CUTLASS/cuBLAS tile shapes a heuristic picks from;
# FlashAttention-2 uses 128-query blocks; split-KV decode (FlashDecoding) splits each sequence's
# keys into 256-key chunks; vector kernels handle 1024 threads x 4 elements per block.
_GEMM_TILES = ((64.0, 64.0), (64.0, 128.0), (128.0, 128.0), (128.0, 256.0))
_SPLIT_K = (1.0, 2.0, 4.0, 8.0, 16.0)  # cuBLAS/CUTLASS split-K slices for few-tile GEMMs
_K_STEP = 64.0  # main-loop depth per iteration
_ATTN_Q_BLOCK = 128.0
_DECODE_KEY_SPLIT = 256.0
_VECTOR_BLOCK_ELEMS = 4096.0
# Families run on the matrix units: the op table's tensor families, fused MoE layers
# (grouped expert GEMMs, measured by AIConfigurator as one `moe` kernel) and the chunked
# scans of linear-attention / SSM layers, whose chunk products run on tensor cores.
MATRIX_FAMILIES = TENSOR_FAMILIES | {"moe", "linear_attn"}
# Matrix families whose fp32 rows are priced on the vector (SIMT) fp32 peak: NeuSight's fp32
# convolutions (the conv family's only measurements) were fitted there, so fp32 conv stays
# as calibrated; fp16/bf16 convs (cuDNN implicit GEMM) take the tensor peak of their dtype.
SIMT_FP32_FAMILIES = frozenset({"conv"})


@runtime_checkable
class EfficiencyModel(Protocol):
    """η(family, shape, device) in (0, 1]: the fraction of the roofline a kernel reaches."""

    def eta(self, ops: pd.DataFrame, device: Device) -> np.ndarray: ...


@runtime_checkable
class ExecutionTimeModel(Protocol):
    """Seconds per op-table row on a device (collective rows are priced by the comm layer)."""

    def kernel_times(self, ops: pd.DataFrame, device: Device) -> np.ndarray: ...


@runtime_checkable
class NotedTimeModel(ExecutionTimeModel, Protocol):
    """A kernel time model that says what a forecast's prices borrowed (e.g. half-precision
    convs priced with gemm's tensor-core efficiency: kernels.PhysicsModel)."""

    def notes(self, ops: pd.DataFrame) -> list[str]: ...


def model_notes(time_model: ExecutionTimeModel, ops: pd.DataFrame) -> list[str]:
    """The notes a time model has about pricing `ops` (none for models that keep none)."""
    return time_model.notes(ops) if isinstance(time_model, NotedTimeModel) else []


class UnitEfficiency:
    """η = 1 everywhere: the plain roofline. The kernel-efficiency layer replaces it."""

    def eta(self, ops: pd.DataFrame, device: Device) -> np.ndarray:
        return np.ones(len(ops))


def peak_flops(ops: pd.DataFrame, device: Device) -> np.ndarray:
    """Peak FLOP/s per row: the matrix-unit peak of the row's dtype for matmul families
    (`matrix_peak_flops` where the device lists one, else the dense peak; fp16/bf16 convs
    included), the vector (fp32) rate for the rest and for fp32 convs (SIMT_FP32_FAMILIES).
    Hash lookups, so 10^6 rows stay cheap."""
    fam = ops["family"]
    simt_fp32 = fam.isin(SIMT_FP32_FAMILIES).to_numpy() & (ops["dtype"] == "fp32").to_numpy()
    tensor = fam.isin(MATRIX_FAMILIES).to_numpy() & ~simt_fp32
    peaks = {d.value: flops for d, flops in device.dense_peak_flops.items()}
    peaks.update({d.value: flops for d, flops in device.matrix_peak_flops.items()})
    per_dtype = ops["dtype"].map(peaks).to_numpy(dtype=float, na_value=np.nan)
    missing = tensor & np.isnan(per_dtype)
    if missing.any():
        device.peak_flops(ops["dtype"].to_numpy()[missing][0])  # raises, naming the dtype
    vector_peak = device.dense_peak_flops.get(DType.FP32) or min(device.dense_peak_flops.values())
    return np.where(tensor, per_dtype, vector_peak)


def _waves(tiles: np.ndarray, sms: float) -> np.ndarray:
    return np.ceil(np.maximum(tiles, 1.0) / sms) * sms


def _gemm_quantization(b: np.ndarray, m: np.ndarray, n: np.ndarray, k: np.ndarray,
                       sms: float) -> np.ndarray:
    """Padded work / real work for the best (tile, split-K) choice: whole tiles, whole 64-deep
    k-steps, whole waves. Each candidate's padded work only grows with m, n and k, so the
    minimum over them does too: a bigger GEMM is never forecast faster."""
    best = np.full(len(m), np.inf)
    real = np.maximum(m * n * k, 1.0)
    for tm, tn in _GEMM_TILES:
        tiles = b * np.ceil(m / tm) * np.ceil(n / tn)
        for split in _SPLIT_K:
            k_steps = np.ceil(np.maximum(k, 1.0) / (split * _K_STEP)) * _K_STEP
            padded = _waves(tiles * split, sms) * tm * tn * k_steps
            best = np.minimum(best, padded / (b * real))
    return best


def thread_blocks(ops: pd.DataFrame) -> np.ndarray:
    """Independent thread blocks a kernel can spread over the SMs (before split-K): output
    tiles for GEMMs and MoE expert GEMMs (64x64, the smallest tile), query blocks for prefill
    attention, key chunks for split-KV decode, one block per row for row reductions (norms,
    softmax), 4096-element chunks for other vector kernels."""
    fam = ops["family"]
    b, m, n = (ops[c].to_numpy(dtype=float) for c in ("b", "m", "n"))
    tiles = np.ceil(np.maximum(m * n, 1.0) / _VECTOR_BLOCK_ELEMS)
    tiles = np.where(fam.isin(("gemm", "moe")).to_numpy(),
                     b * np.ceil(m / 64.0) * np.ceil(n / 64.0), tiles)
    tiles = np.where((fam == "attn_prefill").to_numpy(), b * np.ceil(m / _ATTN_Q_BLOCK), tiles)
    tiles = np.where((fam == "attn_decode").to_numpy(), b * np.ceil(n / _DECODE_KEY_SPLIT), tiles)
    tiles = np.where(fam.isin(("norm", "softmax")).to_numpy(), b * m, tiles)  # a block per row
    return np.maximum(tiles, 1.0)


def wave_quantization(ops: pd.DataFrame, device: Device) -> np.ndarray:
    """u >= 1: compute slots lost to partial tiles and to idle SMs in the last wave,
    u = ceil(tiles / N_SM) * N_SM / tiles (times tile padding for GEMMs). 1 on CPUs, whose
    cores do not run fixed-size tiles in lock-step waves."""
    if device.kind == "cpu":
        return np.ones(len(ops))
    fam = ops["family"]
    b, m, n, k = (ops[c].to_numpy(dtype=float) for c in ("b", "m", "n", "k"))
    sms = float(device.sm_count)
    tiles = thread_blocks(ops)
    u = _waves(tiles, sms) / tiles
    gemm = (fam == "gemm").to_numpy()
    if gemm.any():
        u[gemm] = _gemm_quantization(b[gemm], m[gemm], n[gemm], k[gemm], sms)
    return u


def roofline_times(ops: pd.DataFrame, device: Device, waves: bool = True) -> np.ndarray:
    """max(FLOPs / peak x u, bytes / bandwidth) per row; the waves factor wastes compute
    slots only, since a partly idle GPU can still saturate memory bandwidth."""
    compute = ops["flops"].to_numpy(dtype=float) / peak_flops(ops, device)
    if waves:
        compute = compute * wave_quantization(ops, device)
    traffic = ops["bytes_read"].to_numpy(dtype=float) + ops["bytes_written"].to_numpy(dtype=float)
    return np.maximum(compute, traffic / device.memory_bandwidth_bps(traffic))


class RooflineModel:
    """t = roofline(F, B) x wave quantisation / η; zero for collective rows."""

    def __init__(self, efficiency: EfficiencyModel | None = None, waves: bool = True):
        self.efficiency = efficiency or UnitEfficiency()
        self.waves = waves

    def kernel_times(self, ops: pd.DataFrame, device: Device) -> np.ndarray:
        eta = np.clip(self.efficiency.eta(ops, device), 1e-6, 1.0)  # never beat the roofline
        times = roofline_times(ops, device, self.waves) / eta
        return np.where(ops["family"].isin(COMM_FAMILIES).to_numpy(), 0.0, times)
