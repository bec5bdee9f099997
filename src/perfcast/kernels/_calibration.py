"""Fitted kernel-model parameters as plain JSON, and the model that forecasts with them.

Two tiers per device: *cross-generation* (shared family parameters and shape residuals fitted
on other devices, applied through this device's spec sheet) and *target-measured* (plus this
device's own corrections fitted on a sample of its measurements)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.errors import InputError, parse_user_json, read_user_text
from perfcast.kernels._fit import fit_family
from perfcast.kernels._json_cache import read_json_data
from perfcast.kernels._physics import (
    TENSOR_DONORS,
    FamilyParams,
    Prepared,
    borrows_tensor_terms,
    concat_prepared,
    evaluate,
    prepare,
    variants,
)
from perfcast.kernels._residual import NeighbourResidual, ResidualGrid, regime_bins
from perfcast.kernels._roofline import roofline_times
from perfcast.ops import COLUMNS, COMM_FAMILIES
from perfcast.specs import Device, get_device

__all__ = [
    "CROSS_GENERATION", "Calibration", "KERNEL_SOURCES", "KernelSource", "PhysicsModel",
    "SCHEMA_VERSION", "TARGET_MEASURED", "UNMODELLED_FAMILIES",
    "add_target_corrections", "calibration_devices", "devices_by_family", "fit_calibration",
    "kernel_rows", "kernel_source", "measurement_ops", "shipped_calibration",
]

SCHEMA_VERSION = 1
TARGET_PRIOR_WEIGHT = 0.01  # pull of a device refit toward the shared parameters
# A family's device slopes (power, bandwidth) extrapolate from this many devices on. Two fix a
# slope by their two efficiencies alone: it interpolates between them, but beyond them it
# carries their noise to every other GPU (Vidur's tables, one of three GPUs held out: A40's
# memory-bound kernels 1.5-5x off, worse than the roofline), so there it stops at the nearer
# device (FamilyParams.device_range).
SLOPE_MIN_DEVICES = 3
CROSS_GENERATION = "cross_generation"
TARGET_MEASURED = "target_measured"
# Stored families that are not fitted (none today: fused MoE layers, AIConfigurator `moe`,
# are fitted as their own family, see perfcast.kernels._moe).
UNMODELLED_FAMILIES: frozenset[str] = frozenset()
# Op families without measurements of their own borrow a measured family's parameters.
FALLBACK = {"kv_write": "elementwise", "rope": "elementwise", "embedding": "elementwise",
            "sampling": "softmax", "moe": "gemm", "conv": "gemm"}
# The measured kernel a forecast row of each family stands for when its op name was never
# measured (TensorRT-LLM GEMM/attention/fused MoE, Vidur's fused serving kernels).
DEFAULT_OP = {"gemm": "gemm", "attn_prefill": "attn", "attn_decode": "attn",
              "norm": "input_layernorm", "activation": "mlp_act", "elementwise": "add",
              "rope": "attn_rope", "embedding": "emb", "softmax": "softmax",
              "kv_write": "add", "sampling": "softmax", "moe": "moe_torch_flow_cutlass"}


@dataclass
class DeviceCorrection:
    """One device x family x dtype: the family refitted on the device's own sample (anchored
    on the shared parameters), the device's own regime grid over what the shared grid leaves
    (so its data overrides cross-device shape effects where it has them), and residuals at
    its measured shapes."""

    params: FamilyParams
    residual: NeighbourResidual
    rows: int
    grid: ResidualGrid | None = None
    # The measured kernel that prices this family's rows whose kernel the device never ran
    # (a user's sweep names its GEMM `matmul`, a forecast `linear:qkv`): the device's own
    # measurement stands for the family there. None (shipped corrections, old files): the
    # family's default kernel (DEFAULT_OP).
    default_op: str | None = None

    def to_dict(self) -> dict:
        out = {"params": self.params.to_dict(), "residual": self.residual.to_dict(),
               "rows": self.rows}
        if self.grid is not None:
            out["grid"] = self.grid.to_dict()
        if self.default_op is not None:
            out["default_op"] = self.default_op
        return out

    @classmethod
    def from_dict(cls, data: dict) -> DeviceCorrection:
        grid = ResidualGrid.from_dict(data["grid"]) if "grid" in data else None
        return cls(params=FamilyParams.from_dict(data["params"]), rows=data["rows"],
                   residual=NeighbourResidual.from_dict(data["residual"]), grid=grid,
                   default_op=data.get("default_op"))


@dataclass
class Calibration:
    """Family parameters, shared shape residuals and per-device corrections, with provenance."""

    families: dict[str, FamilyParams]
    residuals: dict[str, ResidualGrid] = field(default_factory=dict)
    devices: dict[str, dict[str, DeviceCorrection]] = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    # A user calibration's composition term, fitted on whole steps timed on the device
    # (`perfcast measure --model`): {"stack": name, "host_speed": factor, "steps": [...]};
    # empty when none was measured (and in shipped calibrations).
    host: dict = field(default_factory=dict)
    # A user calibration's target tier of the learned model (`--kernel-model learned`): the
    # device's residual over the shipped trees, fitted on the same rows,
    # learned_target_tier's {"over": trees' fingerprint, "devices": {...}, "checks"}; empty in
    # shipped calibrations and in files written before it.
    learned: dict = field(default_factory=dict)

    def tier_for(self, device: str) -> str:
        return TARGET_MEASURED if device in self.devices else CROSS_GENERATION

    def to_json(self) -> str:
        data = {
            "schema_version": SCHEMA_VERSION, "provenance": self.provenance,
            "families": {k: v.to_dict() for k, v in sorted(self.families.items())},
            "residuals": {k: v.to_dict() for k, v in sorted(self.residuals.items())},
            "devices": {d: {f: c.to_dict() for f, c in sorted(fams.items())}
                        for d, fams in sorted(self.devices.items())},
        }
        if self.host:
            data["host"] = self.host
        if self.learned:
            data["learned"] = self.learned
        return json.dumps(data, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Calibration:
        return cls.from_data(json.loads(text))

    @classmethod
    def from_data(cls, data: dict) -> Calibration:
        """From the parsed JSON document (matrices may be numpy arrays: `read_json_data`)."""
        if data.get("schema_version") != SCHEMA_VERSION:
            raise InputError("calibration.schema_version",
                             f"got {data.get('schema_version')!r}", str(SCHEMA_VERSION))
        return cls(
            families={k: FamilyParams.from_dict(v) for k, v in data["families"].items()},
            residuals={k: ResidualGrid.from_dict(v) for k, v in data["residuals"].items()},
            devices={d: {f: DeviceCorrection.from_dict(c) for f, c in fams.items()}
                     for d, fams in data["devices"].items()},
            provenance=data["provenance"], host=data.get("host", {}),
            learned=data.get("learned", {}))

    @classmethod
    def load(cls, path: str | Path) -> Calibration:
        expected = "a file written by `perfcast calibrate`"
        text = read_user_text(path, "calibration", expected)
        if not isinstance(parse_user_json(text, "calibration", str(path), expected), dict):
            raise InputError("calibration", f"{path} does not hold a JSON object", expected)
        try:
            return cls.from_json(text)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            if isinstance(exc, InputError):
                raise
            what = (f"missing key {exc.args[0]!r}" if isinstance(exc, KeyError)
                    else "a value of the wrong type")
            raise InputError("calibration", f"{path} is not a calibration ({what})",
                             expected) from None

    def merged_with(self, other: Calibration) -> Calibration:
        """This calibration plus another's per-device corrections (a user's own devices),
        family by family: a device's shipped corrections of families the other did not
        measure stay."""
        devices = {d: {**self.devices.get(d, {}), **other.devices.get(d, {})}
                   for d in sorted(set(self.devices) | set(other.devices))}
        prov = {**self.provenance, "merged": other.provenance}
        return Calibration(self.families, self.residuals, devices, prov,
                           other.host or self.host, other.learned or self.learned)


_TEXT = ("layer", "op", "family", "phase", "dtype")

# TensorRT-LLM's decode kernel (XQA) handles up to 32 query heads per KV head; wider groups
# fall back to a generic kernel 20-50x slower per byte (AIConfigurator H100 data).
WIDE_GQA_GROUP = 32


def _wide_gqa(rows: pd.DataFrame) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):  # non-attention rows have NaN heads
        group = rows["heads"].to_numpy(dtype=float) / rows["kv_heads"].to_numpy(dtype=float)
    decode = (rows["family"] == "attn_decode").to_numpy() & (rows["op"] == "attn").to_numpy()
    return decode & np.nan_to_num(group > WIDE_GQA_GROUP, nan=False).astype(bool)


def measurement_ops(rows: pd.DataFrame) -> pd.DataFrame:
    """Measurement-store rows as op-table rows (all traffic counted as bytes_read); the op
    name carries the weight and KV-cache dtypes when they differ from the math dtype
    (weight-only quantisation, FP8 KV cache): they are different kernels."""
    dtype = rows["dtype"].astype(str)
    wdt, kvdt = rows["weight_dtype"].astype(str), rows["kv_dtype"].fillna("").astype(str)
    op = (rows["op"].astype(str) + np.where(wdt != dtype, "/w" + wdt, "")
          + np.where((kvdt != "") & (kvdt != dtype), "/kv" + kvdt, "")
          + np.where(_wide_gqa(rows), "/wide_gqa", ""))
    b = np.maximum(np.rint(rows["b"].fillna(1).to_numpy(dtype=float)), 1).astype("int64")
    out = pd.DataFrame({
        "layer": "bench", "op": op.to_numpy(), "family": rows["family"].astype(str).to_numpy(),
        "phase": "bench", "b": b, "m": rows["m"].to_numpy(dtype=float),
        "n": rows["n"].to_numpy(dtype=float), "k": rows["k"].fillna(0).to_numpy(dtype=float),
        "flops": rows["flops"].to_numpy(dtype=float),
        "bytes_read": rows["bytes"].to_numpy(dtype=float), "bytes_written": 0.0,
        "dtype": rows["dtype"].astype(str).to_numpy(), "count": np.int64(1)})
    return out[COLUMNS]


def _resolve(name: str, devices: dict[str, Device] | None) -> Device:
    return (devices or {}).get(name) or get_device(name)


def _prepare_rows(rows: pd.DataFrame, devices: dict[str, Device] | None
                  ) -> tuple[Prepared, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    parts, lat, grp, bins, dts = [], [], [], [], []
    for name, part in rows.groupby("device", sort=True):
        ops = measurement_ops(part)
        parts.append(prepare(ops, _resolve(name, devices), part["timing"].to_numpy()))
        lat.append(part["latency_s"].to_numpy(dtype=float))
        grp.append(np.full(len(part), name, dtype=object))
        bins.append(regime_bins(parts[-1].regime))
        dts.append(variants(ops))
    return (concat_prepared(parts), np.concatenate(lat), np.concatenate(grp),
            np.concatenate(bins), np.concatenate(dts))


def kernel_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows (store schema) a kernel calibration fits: collectives (priced by
    perfcast.comm) and unmodelled families left out."""
    return rows[~rows["family"].isin(COMM_FAMILIES | UNMODELLED_FAMILIES).to_numpy()]


def _rows_order(rows: pd.DataFrame) -> pd.DataFrame:
    return rows.sort_values("device", kind="stable")


def fit_calibration(train: pd.DataFrame, target: pd.DataFrame | None = None,
                    devices: dict[str, Device] | None = None,
                    provenance: dict | None = None) -> Calibration:
    """Fit family parameters and shared residuals on `train` rows (store schema); then, for
    each device in `target`, its own corrections on those rows (the target-measured tier).
    `devices` supplies specs for names outside the catalog (e.g. the local CPU)."""
    train = _rows_order(kernel_rows(train))
    families, residuals = {}, {}
    for family, rows in train.groupby("family", sort=True):
        prep, lat, grp, bins, dts = _prepare_rows(rows, devices)
        fitted_on = len(set(grp))
        params = fit_family(family, prep, lat, grp, device_slopes=fitted_on > 1)
        if fitted_on < SLOPE_MIN_DEVICES:
            params = replace(params, device_range=_device_range(prep))
        families[family] = params
        residuals[family] = ResidualGrid.fit(bins, dts, np.log(lat / evaluate(params, prep)))
    cal = Calibration(families, residuals, {}, dict(provenance or {}))
    return cal if target is None else add_target_corrections(cal, target, devices)


def _device_range(prep: Prepared) -> dict[str, list[float]]:
    """[lo, hi] of the device features the slopes multiply, over the fitted rows."""
    return {name: [float(v.min()), float(v.max())] for name, v in
            (("log_flops_per_w", prep.log_flops_per_w), ("log_bw_tbps", prep.log_bw_tbps))}


def add_target_corrections(cal: Calibration, target: pd.DataFrame,
                           devices: dict[str, Device] | None = None) -> Calibration:
    """A copy of `cal` with per-device corrections fitted on `target` rows (store schema)."""
    rows = _rows_order(kernel_rows(target))
    own = _fit_targets(cal, rows, devices)
    return Calibration(cal.families, cal.residuals, {**cal.devices, **own}, cal.provenance)


def _fit_targets(cal: Calibration, target: pd.DataFrame, devices: dict[str, Device] | None
                 ) -> dict[str, dict[str, DeviceCorrection]]:
    """Per device x family x dtype: an anchored refit, then nearest-shape residuals."""
    out: dict[str, dict[str, DeviceCorrection]] = {}
    for (name, family, dtype), rows in target.groupby(["device", "family", "dtype"], sort=True):
        fam = family if family in cal.families else FALLBACK.get(family)
        if fam not in cal.families:
            continue
        prep, lat, grp, bins, dts = _prepare_rows(rows, devices)
        shared = np.exp(cal.residuals[fam].correction(bins, dts))
        own = fit_family(fam, prep, lat / shared, grp, init=cal.families[fam],
                         prior_weight=TARGET_PRIOR_WEIGHT)
        modelled = evaluate(own, prep) * shared
        grid = ResidualGrid.fit(bins, dts, np.log(lat / modelled))
        modelled = modelled * np.exp(grid.correction(bins, dts))
        near = NeighbourResidual.fit(measurement_ops(rows), dts, np.log(lat / modelled))
        out.setdefault(name, {})[f"{family}/{dtype}"] = DeviceCorrection(
            params=own, residual=near, rows=len(rows), grid=grid)
    return out


def as_default_kernels(ops: pd.DataFrame, unknown: np.ndarray,
                       defaults: str | list[str]) -> pd.DataFrame:
    """A copy of `ops` whose `unknown` rows (a kernel variant never measured) are renamed to
    `defaults` (one name, or one per unknown row: the family's default kernel, DEFAULT_OP),
    keeping any ':' configuration suffix (fused quantisation, MoE routing)."""
    ops = ops.copy()
    ops.loc[unknown, "op"] = _default_names(ops["op"].to_numpy(dtype=object)[unknown], defaults)
    return ops


def _default_names(names: np.ndarray, defaults: str | list[str]) -> list[str]:
    """`names` renamed to `defaults` (one, or one each), keeping any ':' suffix."""
    names = names.astype(str)
    new = np.broadcast_to(np.asarray(defaults, dtype=object), names.shape)
    return [d + (o[o.find(":"):] if ":" in o else "") for d, o in zip(new, names, strict=True)]


class PhysicsModel:
    """ExecutionTimeModel backed by a Calibration; uses a device's own corrections when the
    calibration has them (target-measured), else its spec sheet alone (cross-generation)."""

    def __init__(self, calibration: Calibration):
        self.calibration = calibration

    def _fused_quant_fixed(self, own: dict, family: str, fam: str, params: FamilyParams,
                           prep: Prepared) -> np.ndarray | float:
        """Fixed-cost swap for fused-quantisation GEMM rows (see perfcast.kernels._physics):
        the 16-bit variant's fixed cost on this device replaces the one `evaluate` charged."""
        fused = prep.fixed_class != prep.dtype_class
        if not fused.any():
            return 0.0
        corr = own.get(f"{family}/bf16") or own.get(f"{fam}/bf16")
        p16 = self.calibration.families[fam] if corr is None else corr.params
        keys, classes = prep.fixed_variant[fused], prep.fixed_class[fused]
        out = np.zeros(len(fused))
        out[fused] = p16.fixed_for(keys, classes) - params.fixed_for(keys, classes)
        return out

    def tier(self, device: Device) -> str:
        return self.calibration.tier_for(device.name)

    def notes(self, ops: pd.DataFrame) -> list[str]:
        """What the forecast of `ops` borrowed: tensor-core rows (half precision, or TF32
        convolutions) of a family never fitted on tensor-core kernels take a donor family's
        tensor-core efficiency."""
        out = []
        for family, donor in sorted(TENSOR_DONORS.items()):
            params = self.calibration.families.get(family)
            rows = (ops["family"] == family).to_numpy() & (ops["dtype"] != "fp32").to_numpy()
            if params is not None and rows.any() and borrows_tensor_terms(params):
                dtypes = ", ".join(sorted(set(ops["dtype"].to_numpy()[rows].astype(str))))
                out.append(f"tensor-core {family} ({dtypes}): no measured tensor-core "
                           f"{family} kernels; their efficiency borrowed from {donor}")
        return out

    def kernel_times(self, ops: pd.DataFrame, device: Device,
                     timing: np.ndarray | None = None) -> np.ndarray:
        timing = (np.full(len(ops), "cuda_graph", dtype=object) if timing is None
                  else np.asarray(timing, dtype=object))
        # plain numpy-backed columns (text kept as object arrays, not re-inferred as arrow
        # strings): row selection per group stays a cheap take and string tests stay cheap
        ops = _numpy_frame(ops)
        rows, first = _distinct_rows(ops, timing)
        if len(first) < len(ops):  # a row's time is a function of its row: each priced once
            return self._times(ops.take(first).reset_index(drop=True), device,
                               timing[first])[rows]
        return self._times(ops, device, timing)

    def _times(self, ops: pd.DataFrame, device: Device, timing: np.ndarray) -> np.ndarray:
        """kernel_times of a numpy-backed op table (_numpy_frame): per (family, dtype), the
        family's (or the device's own) parameters and corrections; the parameter-free terms
        of all priced rows prepared in one pass (they are per row)."""
        out = roofline_times(ops, device, waves=False)
        own = self.calibration.devices.get(device.name, {})
        keys, names, jobs = variants(ops), None, []
        for (family, dtype), idx in _groups(ops["family"].to_numpy(),
                                            ops["dtype"].to_numpy()).items():
            fam = family if family in self.calibration.families else FALLBACK.get(family)
            if family in COMM_FAMILIES or fam not in self.calibration.families:
                continue
            corr = own.get(f"{family}/{dtype}") or own.get(f"{fam}/{dtype}")
            params = self.calibration.families[fam] if corr is None else corr.params
            unknown = ~pd.Series(keys[idx]).isin(params.fixed_s).to_numpy()
            if unknown.any():  # never measured: priced as the family's default kernel, the
                # device's own measured one (`default_op`) when a user calibration names it
                names = ops["op"].to_numpy(dtype=object).copy() if names is None else names
                default = (None if corr is None else corr.default_op) or DEFAULT_OP.get(
                    family, DEFAULT_OP.get(fam, "gemm"))
                names[idx[unknown]] = _default_names(names[idx[unknown]], default)
            jobs.append((family, fam, corr, params, idx))
        if names is not None:
            ops = ops.assign(op=pd.Series(names, dtype=object, copy=False))
        priced = np.concatenate([job[-1] for job in jobs]) if jobs else np.zeros(0, dtype=int)
        preps = prepare(ops.iloc[priced], device, timing[priced]) if jobs else None
        start = 0
        for family, fam, corr, params, idx in jobs:
            prep = preps.rows(slice(start, start + len(idx)))
            start += len(idx)
            bins, dts = regime_bins(prep.regime), prep.variant
            donor = self.calibration.families.get(TENSOR_DONORS.get(fam, ""))
            t = (evaluate(params, prep, donor)
                 + self._fused_quant_fixed(own, family, fam, params, prep))
            log_fix = self.calibration.residuals[fam].correction(bins, dts)
            if corr is not None:
                log_fix = log_fix + corr.residual.correction(ops.iloc[idx], dts)
                if corr.grid is not None:
                    log_fix = log_fix + corr.grid.correction(bins, dts)
            out[idx] = np.maximum(t * np.exp(log_fix), out[idx])  # never beat the roofline
        comm = ops["family"].isin(COMM_FAMILIES).to_numpy()
        return np.where(comm, 0.0, out)


# What a kernel's time depends on (with its timing): not its layer, phase or count.
_PRICED = ("op", "family", "dtype", "b", "m", "n", "k", "flops", "bytes_read", "bytes_written")


def _distinct_rows(ops: pd.DataFrame, timing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's code among the distinct (priced columns, timing) and the first row of each
    code: exact (column values factorised, their codes combined in int64), no hashing."""
    key, size = np.zeros(len(ops), dtype=np.int64), 1
    for values in (*(ops[c].to_numpy() for c in _PRICED), timing):
        codes, uniques = pd.factorize(values)  # NaN: -1
        radix = len(uniques) + 1
        if size * radix >= 2**62:  # renumber the key so far densely before it could overflow
            key, seen = pd.factorize(key)
            size = len(seen)
        key, size = key * radix + (codes + 1), size * radix
    rows, uniques = pd.factorize(key)
    first = np.empty(len(uniques), dtype=np.int64)
    first[rows[::-1]] = np.arange(len(rows) - 1, -1, -1)
    return rows, first


def _groups(family: np.ndarray, dtype: np.ndarray) -> dict[tuple, np.ndarray]:
    """Row positions (ascending) per (family, dtype), keys sorted: `groupby.indices` without
    its per-call overhead."""
    fc, fu = pd.factorize(family)
    dc, du = pd.factorize(dtype)
    combined = np.where((fc < 0) | (dc < 0), -1, fc.astype(np.int64) * max(len(du), 1) + dc)
    order = np.argsort(combined, kind="stable")
    uniq, starts = np.unique(combined[order], return_index=True)
    bounds = [*starts[1:].tolist(), len(order)] if len(order) else []
    out = {(fu[u // max(len(du), 1)], du[u % max(len(du), 1)]): order[a:b]
           for u, a, b in zip(uniq.tolist(), starts.tolist(), bounds, strict=True) if u >= 0}
    return dict(sorted(out.items()))


def _numpy_frame(ops: pd.DataFrame) -> pd.DataFrame:
    """The op table's COLUMNS as numpy-backed columns, text as object arrays (kept as object
    dtype: pandas would otherwise re-infer arrow-backed strings, slow to test and take)."""
    if list(ops.columns) == COLUMNS and all(
            ops[c].dtype == object for c in _TEXT):  # already so (e.g. serving grid rows)
        return ops
    cols = {}
    for c in COLUMNS:
        if c in _TEXT:
            cols[c] = pd.Series(ops[c].to_numpy(dtype=object), dtype=object, copy=False)
        else:
            cols[c] = ops[c].to_numpy()
    return pd.DataFrame(cols)


@dataclass(frozen=True)
class KernelSource:
    """One shipped kernel source: a measurement store (in perfcast.measure's data folder)
    and the calibration fitted on it (in perfcast.kernels' data folder), with the framework
    whose kernels were timed."""

    name: str
    store_file: str
    calibration_file: str
    framework: str
    version: str
    description: str


KERNEL_SOURCES: dict[str, KernelSource] = {s.name: s for s in (
    KernelSource("default", "kernels.parquet", "calibration.json",
                 "mixed", "TensorRT-LLM (AIConfigurator), PyTorch 1.x, vLLM v0",
                 "AIConfigurator TensorRT-LLM tables, NeuSight (PyTorch 1.x fp32), Vidur "
                 "(vLLM v0) and LLMCompass: perfcast's shipped calibration"),
    KernelSource("vllm", "kernels_vllm.parquet", "calibration_vllm.json",
                 "vLLM", "0.24.0 (A100: 0.14.0)",
                 "AIConfigurator tables timed with vLLM's own kernels: FA2/FA3/FA4 and "
                 "flashinfer/triton attention, torch linear, cutlass/DeepGEMM/flashinfer fp8 "
                 "and nvfp4 GEMMs, fused MoE (triton, flashinfer, marlin)"),
    KernelSource("sglang", "kernels_sglang.parquet", "calibration_sglang.json",
                 "SGLang", "0.5.14 (A100: 0.5.10)",
                 "AIConfigurator tables timed with SGLang's own kernels: fa3, flashinfer, "
                 "triton and trtllm_mha attention, torch linear, sgl-kernel/DeepGEMM fp8 and "
                 "flashinfer nvfp4 GEMMs, fused MoE (triton, flashinfer, marlin)"),
)}


def kernel_source(name: str) -> KernelSource:
    """The shipped kernel source called `name`, or an InputError listing the names."""
    if name not in KERNEL_SOURCES:
        raise InputError("kernel_source", f"unknown kernel source {name!r}",
                         list(KERNEL_SOURCES))
    return KERNEL_SOURCES[name]


@cache
def _load_shipped(name: str) -> Calibration:
    path = resources.files("perfcast.kernels") / "data" / KERNEL_SOURCES[name].calibration_file
    return Calibration.from_data(read_json_data(path))


def shipped_calibration(source: str = "default") -> Calibration:
    """The calibration fitted on a shipped kernel source's store (scripts/fit_calibration.py
    --source NAME); read once per process, the same object on every call."""
    return _load_shipped(kernel_source(source).name)


def calibration_devices(source: str = "default") -> dict[str, tuple[str, ...]]:
    """Per fitted family, the sorted devices with measured rows in the source's store: from
    the calibration's provenance (`devices_by_family`, written at fit time) or, for a
    calibration fitted before it was recorded, from the devices it holds corrections for."""
    cal = shipped_calibration(source)
    recorded = cal.provenance.get("devices_by_family")
    if recorded is not None:
        return {f: tuple(d) for f, d in sorted(recorded.items())}
    out: dict[str, set[str]] = {}
    for device, fams in cal.devices.items():
        for key in fams:
            out.setdefault(key.split("/")[0], set()).add(device)
    return {f: tuple(sorted(d)) for f, d in sorted(out.items())}


def devices_by_family(store: pd.DataFrame) -> dict[str, list[str]]:
    """Per fitted (non-collective) family, the sorted devices with rows in `store`: the
    provenance entry `calibration_devices` reads back."""
    pairs = kernel_rows(store)[["family", "device"]].drop_duplicates().astype(str)
    return {f: sorted(g["device"]) for f, g in pairs.groupby("family", sort=True)}


@cache
def default_time_model() -> PhysicsModel:
    """The kernel model every layer prices with when none is given: the shipped calibration
    (one instance, so its memoised prices are shared by every caller)."""
    return PhysicsModel(shipped_calibration())
