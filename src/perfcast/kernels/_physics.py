"""A bounded physical kernel-time model whose few parameters are fitted on measurements.

    t = t_fixed + t_quant + (T_c^q + T_m^q + T_b^q)^(1/q),
    T_c = F·u / (P·η_c),  T_m = B / (BW·η_m),  T_b = ceil(blocks / SMs) · t_block

η_c = σ(a_math + b·log(P/TDP)): tensor cores lose efficiency as peak FLOP/s per watt grows
(clocks drop under the power limit: L40S, Blackwell, FP8/FP4 run further below peak than
A100 BF16). η_m = σ(m0 + m1·log BW), capped by what the kernel's thread blocks keep in
flight: (blocks / SMs) / k of the bandwidth, k blocks per SM saturating it (Little's law in
units that carry across generations, since each SM's share of bandwidth grows with BW).
Fitted on fewer than three devices, b and m1 only interpolate: beyond the fitted devices'
range, η is the nearer device's (`FamilyParams.device_range`; one device: no slopes).
T_b: every thread block lives at least t_block, so kernels of many tiny blocks (decode
attention over thousands of sequences) are bound by waves of blocks, not bytes or FLOPs.
t_fixed is the kernel's fixed cost per kernel variant plus
the launch cost of the timing method; t_quant is the dynamic-quantisation pass of FP8/FP4
GEMMs (reads 16-bit activations, writes the narrow copy). A GEMM whose producer already
quantised its input (op suffix `:fused_quant`) pays neither t_quant nor the quantisation
kernels' share of t_fixed: its fixed cost is its 16-bit variant's (same GEMM launch and
prologue), while its shape residuals stay those measured for its own dtype.
η_c, η_m ≤ 1, t_fixed ≥ 0 and the smooth max is ≥ max(T_c, T_m), so a forecast never beats
the roofline.
Half-precision convolutions (fp16/bf16 `conv` rows) run cuDNN's implicit-GEMM kernels on the
tensor cores (T_c at the dtype's tensor peak, perfcast.kernels._roofline). The conv family is
fitted on NeuSight's fp32 convs only, so its tensor-class η_c was never fitted: while a family
has no half-precision measurements, its tensor rows borrow the compute terms (tensor
intercept and power slope) of a fitted donor family (`TENSOR_DONORS`: conv <- gemm, the same
tensor-core GEMM main loop on the same units) and keep their own memory, thread-block and
fixed-cost terms (conv's im2col-style traffic and launch cost, fitted on conv measurements).
`PhysicsModel.notes` says so for a forecast's notes.
Fused MoE rows (family `moe`) take T_c, the bytes and the thread blocks from the expert loads of
the measured EP rank under their routing skew (perfcast.kernels._moe); t_fixed is then the
routing/permute/finalize cost of the MoE kernel variant.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from perfcast.kernels._moe import MOE_FAMILY, moe_terms
from perfcast.kernels._roofline import peak_flops, thread_blocks, wave_quantization
from perfcast.ops import FUSED_QUANT
from perfcast.specs import Device, bytes_per_element

__all__ = ["TENSOR_DONORS", "FamilyParams", "Prepared", "borrows_tensor_terms",
           "concat_prepared", "device_features", "evaluate", "has_tensor_fit", "prepare",
           "regime_coords", "variants"]

QUANTISED_GEMM_DTYPES = ("fp8", "fp4", "int8")
_FUSED_SUFFIX = ":" + FUSED_QUANT
DEFAULT_TDP_W = 300.0  # for spec sheets without a TDP (none of the shipped GPUs lacks one)
# family -> fitted family whose tensor-core compute terms it borrows while it has no
# half-precision measurements of its own (module docstring).
TENSOR_DONORS = {"conv": "gemm"}
_SIMT_CLASSES = ("fp32", "default")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


@dataclass
class FamilyParams:
    """Fitted parameters of one kernel family (see module docstring for the form)."""

    family: str
    compute_intercept: dict[str, float] = field(default_factory=lambda: {"tensor": 1.5,
                                                                         "simt": 1.5})
    power_slope: float = 0.0
    memory_intercept: float = 1.5
    bandwidth_slope: float = 0.0
    blocks_per_sm_to_saturate: float = 2.0  # resident blocks per SM that saturate bandwidth
    block_time_s: float = 1e-6  # shortest life of one thread block (prologue, epilogue)
    fixed_s: dict[str, float] = field(default_factory=lambda: {"default": 2e-6})
    launch_s: dict[str, float] = field(default_factory=lambda: {"cuda_graph": 0.0})
    smoothness: float = 4.0
    # feature -> [lo, hi]: the devices a slope was fitted on, when fewer than three; the slopes
    # price only within that range (beyond it, the nearer device's efficiency). None: no bound
    device_range: dict[str, list[float]] | None = None

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        if self.device_range is None:  # files of families fitted on 3+ devices stay as they were
            del out["device_range"]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> FamilyParams:
        return cls(**data)

    def fixed_for(self, variant: np.ndarray, dtype_class: np.ndarray) -> np.ndarray:
        """Fixed seconds per row: the variant's own, else its dtype class's, else default."""
        return self.fixed_at(*_pair_codes(variant, dtype_class))

    def fixed_at(self, codes: np.ndarray, pairs: list[tuple]) -> np.ndarray:
        """`fixed_for` of rows given as codes into their distinct (variant, class) pairs."""
        table = self.fixed_s
        default = table.get("default", min(table.values()))
        values = np.array([table.get(v, table.get(c, default)) for v, c in pairs])
        return values[codes] if len(codes) else np.zeros(0)

    def launch_at(self, codes: np.ndarray, timings: list[str]) -> np.ndarray:
        """Launch seconds of rows given as codes into their distinct timings."""
        worst = max(self.launch_s.values())
        values = np.array([self.launch_s.get(t, worst) for t in timings], dtype=float)
        return values[codes] if len(codes) else np.zeros(0)


def _dtype_class(dtype: str) -> str:
    return {"bf16": "16bit", "fp16": "16bit", "tf32": "fp32"}.get(dtype, dtype)


def _per_unique(values: np.ndarray, fn) -> np.ndarray:
    """fn applied once per distinct value, broadcast back (hash-based, cheap on 10^6 rows)."""
    codes, uniques = pd.factorize(np.asarray(values, dtype=object))
    mapped = np.array([fn(u) for u in uniques], dtype=object)
    return mapped[codes] if len(codes) else np.zeros(0, dtype=object)


def _codes(values: np.ndarray) -> tuple[np.ndarray, list]:
    """Codes of distinct values and the values themselves."""
    codes, uniques = pd.factorize(np.asarray(values, dtype=object))
    return codes, list(uniques)


def _pair_codes(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, list[tuple]]:
    """Codes of distinct (a, b) pairs and the pairs themselves."""
    ca, ua = pd.factorize(np.asarray(a, dtype=object))
    cb, ub = pd.factorize(np.asarray(b, dtype=object))
    combined = ca.astype(np.int64) * max(len(ub), 1) + cb
    uniq, codes = np.unique(combined, return_inverse=True)
    pairs = [(ua[u // max(len(ub), 1)], ub[u % max(len(ub), 1)]) for u in uniq]
    return codes, pairs


def device_features(device: Device, dtypes: np.ndarray) -> dict[str, np.ndarray]:
    """log(peak TFLOP/s per watt) per row's dtype and log(bandwidth in TB/s)."""
    tdp = device.tdp_w or DEFAULT_TDP_W
    peak = _per_unique(dtypes, lambda d: device.dense_peak_flops.get(d, np.nan)).astype(float)
    return {"log_flops_per_w": np.log(peak / 1e12 / tdp),
            "log_bw_tbps": np.full(len(dtypes), np.log(device.hbm_bandwidth_bps / 1e12))}


@dataclass(frozen=True)
class Prepared:
    """Per-row quantities that do not depend on fitted parameters (computed once per fit)."""

    t_compute: np.ndarray  # F·u / P
    t_memory: np.ndarray  # B / BW
    blocks_per_sm: np.ndarray  # thread blocks / SMs
    block_waves: np.ndarray  # ceil(thread blocks / SMs)
    t_quant: np.ndarray  # quantisation pass bytes / BW (0 for non-quantised rows)
    log_flops_per_w: np.ndarray
    log_bw_tbps: np.ndarray
    simt: np.ndarray
    dtype_class: np.ndarray
    variant: np.ndarray  # "<op>/<dtype>": the kernel implementation measured
    fixed_variant: np.ndarray  # variant whose fixed cost applies (16-bit one if fused quant)
    fixed_class: np.ndarray  # dtype class for the fixed-cost fallback
    timing: np.ndarray
    regime: np.ndarray  # device-normalised shape coordinates (see regime_coords)

    def rows(self, which: slice | np.ndarray) -> Prepared:
        """The same terms for a subset of the rows (each term is per row)."""
        return Prepared(*(getattr(self, f)[which] for f in self.__dataclass_fields__))

    # Factorised once per Prepared, not at each of a fit's thousands of evaluations.
    @cached_property
    def fixed_keys(self) -> tuple[np.ndarray, list[tuple]]:
        """Codes of the rows' distinct (fixed_variant, fixed_class) pairs, and the pairs."""
        return _pair_codes(self.fixed_variant, self.fixed_class)

    @cached_property
    def timing_keys(self) -> tuple[np.ndarray, list]:
        """Codes of the rows' distinct timings, and the timings."""
        return _codes(self.timing)


def prepare(ops: pd.DataFrame, device: Device, timing: np.ndarray) -> Prepared:
    """Parameter-free terms of the model for op rows on one device."""
    dtypes = ops["dtype"].to_numpy(dtype=object).astype(str)
    feats = device_features(device, dtypes)
    flops = ops["flops"].to_numpy(dtype=float)
    traffic = ops["bytes_read"].to_numpy(dtype=float) + ops["bytes_written"].to_numpy(dtype=float)
    t_quant = np.zeros(len(ops))
    quant = np.isin(dtypes, QUANTISED_GEMM_DTYPES) & (ops["family"] == "gemm").to_numpy()
    fused = quant & _per_unique(ops["op"].to_numpy(dtype=object),
                                lambda o: str(o).endswith(_FUSED_SUFFIX)).astype(bool)
    quant &= ~fused
    if quant.any():
        m, k, b = (ops[c].to_numpy(dtype=float)[quant] for c in ("m", "k", "b"))
        narrow = np.array([bytes_per_element(d) for d in dtypes[quant]])
        t_quant[quant] = b * m * k * (2.0 + narrow) / device.hbm_bandwidth_bps
    t_compute = flops * wave_quantization(ops, device) / peak_flops(ops, device)
    variant, dtype_class = variants(ops), _per_unique(dtypes, _dtype_class)
    fixed_variant, fixed_class = variant.copy(), dtype_class.copy()
    if fused.any():
        fixed_variant[fused] = [v.rsplit("/", 1)[0] + "/bf16" for v in variant[fused]]
        fixed_class[fused] = "16bit"
    blocks = _block_terms(ops, device)
    moe = (ops["family"] == MOE_FAMILY).to_numpy() & (device.kind != "cpu")
    if moe.any():
        t_compute, traffic = t_compute.copy(), traffic.copy()
        width = _moe_overrides(ops, device, moe, t_compute, traffic, blocks)
    regime = regime_coords(ops, device, t_compute, traffic / device.memory_bandwidth_bps(traffic))
    if moe.any():  # occupancy from the expert tiles launched; depth: the expert's width
        regime[moe, 2] = np.log2(blocks["blocks_per_sm"][moe])
        regime[moe, 3] = np.log2(np.maximum(width, 1.0))
    return Prepared(
        t_compute=t_compute,
        t_memory=traffic / device.memory_bandwidth_bps(traffic), t_quant=t_quant,
        **blocks,
        log_flops_per_w=np.nan_to_num(feats["log_flops_per_w"], nan=0.0),
        log_bw_tbps=feats["log_bw_tbps"], simt=dtypes == "fp32",
        dtype_class=dtype_class, variant=variant, fixed_variant=fixed_variant,
        fixed_class=fixed_class, timing=np.asarray(timing, dtype=object),
        regime=regime)


def _moe_overrides(ops: pd.DataFrame, device: Device, moe: np.ndarray, t_compute: np.ndarray,
                   traffic: np.ndarray, blocks: dict[str, np.ndarray]) -> np.ndarray:
    """MoE rows: compute, bytes and thread blocks of the measured EP rank's expert loads
    (perfcast.kernels._moe), on the matrix units of the row's dtype. Returns each MoE row's
    expert width (intermediate size per GPU)."""
    part = ops[moe]
    peak = peak_flops(part.assign(family="gemm"), device)
    terms = moe_terms(part, device, peak)
    t_compute[moe] = terms["t_compute"]
    traffic[moe] = terms["bytes"]
    blocks["blocks_per_sm"] = blocks["blocks_per_sm"].copy()
    blocks["block_waves"] = blocks["block_waves"].copy()
    blocks["blocks_per_sm"][moe] = terms["blocks"] / device.sm_count
    blocks["block_waves"][moe] = np.ceil(terms["blocks"] / device.sm_count)
    return terms["expert_width"]


def regime_coords(ops: pd.DataFrame, device: Device, t_compute: np.ndarray,
                  t_memory: np.ndarray) -> np.ndarray:
    """Where a kernel sits relative to *this* device, so shape effects learned on one GPU
    transfer to another: log2 of compute/memory time balance (ridge at 0), of roofline time
    in microseconds (the fixed-cost regime), of output tiles per SM (occupancy), and of the
    reduction depth k (GEMM main-loop length, attention head dim)."""
    tiny = 1e-12
    balance = np.log2(np.maximum(t_compute, tiny) / np.maximum(t_memory, tiny))
    size = np.log2(np.maximum(np.maximum(t_compute, t_memory) * 1e6, 1e-3))
    rows = ops["b"].to_numpy(dtype=float) * ops["m"].to_numpy(dtype=float)
    tiles = np.maximum(rows / 128.0, 1.0) * np.maximum(ops["n"].to_numpy(dtype=float) / 128.0,
                                                       1.0)
    occupancy = np.log2(tiles / device.sm_count)
    depth = np.log2(np.maximum(ops["k"].to_numpy(dtype=float), 1.0))
    return np.column_stack([balance, size, occupancy, depth])


def variants(ops: pd.DataFrame) -> np.ndarray:
    """Kernel implementation key per row: the op name (before any ':' configuration suffix)
    and the math dtype."""
    codes, uniques = _pair_codes(ops["op"].to_numpy(dtype=object),
                                 ops["dtype"].to_numpy(dtype=object))
    names = np.array([f"{_kernel_name(str(op))}/{dtype}" for op, dtype in uniques],
                     dtype=object)
    return names[codes] if len(codes) else np.zeros(0, dtype=object)


def _kernel_name(op: str) -> str:
    """The op name before its ':' configuration, keeping '/w…', '/kv…' kernel suffixes that
    measurement_ops appends after a configuration (MoE rows with mixed weight dtypes)."""
    name, colon, config = op.partition(":")
    if not colon or "/" not in config:
        return name
    return name + "/" + config.split("/", 1)[1]


def _block_terms(ops: pd.DataFrame, device: Device) -> dict[str, np.ndarray]:
    """Thread-block limits; a CPU runs no thread blocks, so neither limit applies there."""
    if device.kind == "cpu":
        return {"blocks_per_sm": np.full(len(ops), np.inf), "block_waves": np.zeros(len(ops))}
    blocks = thread_blocks(ops)
    return {"blocks_per_sm": blocks / device.sm_count,
            "block_waves": np.ceil(blocks / device.sm_count)}


def concat_prepared(parts: list[Prepared]) -> Prepared:
    return Prepared(*(np.concatenate([getattr(p, f) for p in parts])
                      for f in Prepared.__dataclass_fields__))


def has_tensor_fit(params: FamilyParams) -> bool:
    """Whether a family's parameters were fitted on any non-fp32 (tensor-core) kernel: its
    fixed costs then name a 16-bit/8-bit class or variant."""
    return any(key.rsplit("/", 1)[-1] not in _SIMT_CLASSES for key in params.fixed_s)


def _compute_terms(params: FamilyParams, prep: Prepared, donor: FamilyParams | None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(η_c intercept, power slope) per row: the family's own per compute class, or for the
    tensor rows of a family never fitted on them, its donor's (TENSOR_DONORS)."""
    ci = params.compute_intercept
    intercept = np.where(prep.simt, ci.get("simt", ci["tensor"]), ci["tensor"])
    slope = np.full(len(prep.simt), params.power_slope)
    if borrows_tensor_terms(params) and donor is not None and not prep.simt.all():
        intercept = np.where(prep.simt, intercept, donor.compute_intercept["tensor"])
        slope = np.where(prep.simt, slope, donor.power_slope)
    return intercept, slope


def borrows_tensor_terms(params: FamilyParams) -> bool:
    """Whether a family's tensor-core rows take a donor family's compute terms: it has a
    donor (TENSOR_DONORS) and was never fitted on a half-precision kernel."""
    return params.family in TENSOR_DONORS and not has_tensor_fit(params)


def evaluate(params: FamilyParams, prep: Prepared,
             donor: FamilyParams | None = None) -> np.ndarray:
    """Seconds per prepared row; `donor`: the fitted family whose tensor-core compute terms
    the family's half-precision rows borrow (TENSOR_DONORS; None: its own)."""
    intercept, slope = _compute_terms(params, prep, donor)
    flops_per_w, bw = prep.log_flops_per_w, prep.log_bw_tbps
    if params.device_range is not None:
        flops_per_w = np.clip(flops_per_w, *params.device_range["log_flops_per_w"])
        bw = np.clip(bw, *params.device_range["log_bw_tbps"])
    eta_c = _sigmoid(intercept + slope * flops_per_w)
    eta_m = _sigmoid(params.memory_intercept + params.bandwidth_slope * bw)
    t_c = prep.t_compute / eta_c
    # Few thread blocks cannot keep enough bytes in flight to reach the device bandwidth.
    reach = np.minimum(eta_m, prep.blocks_per_sm / params.blocks_per_sm_to_saturate)
    t_m = prep.t_memory / reach
    t_b = prep.block_waves * params.block_time_s
    q = params.smoothness
    top = np.maximum(np.maximum(np.maximum(t_c, t_m), t_b), 1e-300)
    busy = top * ((t_c / top) ** q + (t_m / top) ** q + (t_b / top) ** q) ** (1.0 / q)
    fixed = params.fixed_at(*prep.fixed_keys)
    launch = params.launch_at(*prep.timing_keys)
    return fixed + launch + prep.t_quant / eta_m + busy
