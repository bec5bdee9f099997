"""A learned kernel-efficiency model: gradient-boosted trees over physical features.

    t = t_roofline·waves × exp(clip(w·r(x) + (1 - w)·(s(x) - log t_roofline·waves)))
    w = min(1, exp(-r(x)))   (the roofline efficiency r predicts)

Two sets of trees: r predicts log(measured / roofline-with-waves), s predicts log(measured)
itself. A kernel near its roofline scales with it from one GPU to another (a streaming kernel
on a faster HBM), which r carries over; one far below it is bound by fixed costs, occupancy or
its implementation, which do not follow the spec sheet (H100 and H200 run vLLM's attention
shapes at about the same speed, though H200 has 43% more bandwidth), which s carries over. On
devices held out of AIConfigurator's and NeuSight's tables, r alone wins on streaming kernels
and s alone on the rest; the weighted sum comes close to the better of the two on both
(schema 2; a schema-1 file has r alone and prices with w = 1, as it was fitted).
Both take their inputs from where a kernel sits on its device (FLOPs,
bytes, arithmetic intensity, thread blocks per SM and waves, roofline compute and memory
times, L2 fit, the device-normalised regime coordinates of the physical model) and from the
spec sheet (SMs, clock, L2, bandwidth, peak FLOP/s per watt for the row's dtype, tensor-core
generation), with the family, dtype, kernel variant and timing method as categories. Gradient
boosting on log features is what KernelSight-LM/NeuSight-style tools fit; trees also stay flat
beyond their data, and the correction is clipped to the range seen in training.

The physical model (perfcast.kernels.PhysicsModel) stays the backbone: a row outside the
learned model's training envelope (a family or dtype it never saw, a GPU with no tensor-core
generation on the scale, or a FLOP/byte count outside the training range by more than an
octave, a device bandwidth or peak FLOP/s per watt by more than a factor e) is priced by it, and
`LearnedTimeModel.extrapolating` says which rows those are. A GPU of a generation the trees
never saw is priced by them when its spec sheet lies inside: on both cross-generation splits
of `perfcast validate kernels` (Ampere + Hopper -> Blackwell; NeuSight's Pascal-Ampere ->
H100) they beat the physical fit there on most families (docs/validation/kernels.md). Trees are
LightGBM's (the field's standard for tabular regression), stored as LightGBM's plain-text
model inside JSON with provenance (no pickles). Intervals are split-conformal over devices:
each family's 5th/95th percentiles of log(measured / forecast) on devices left out of the fit
(grouped K-fold), so the 90% interval is about held-out GPUs, not held-out rows; normalised
by how far each device lies from the fitted ones (perfcast.kernels._conformal, schema 3; its
generation beyond theirs counted too, schema 4), so a GPU with a sibling in the fit gets a
narrow band and one unlike any, or of a newer generation, a wide one.

The target-measured tier (`add_learned_targets`) is one device's own correction over the
trees, fitted on a sample of its measured rows: small boosted trees on log(measured / learned
forecast) over the same features, then nearest-shape interpolation (NeighbourResidual) of what
they leave (`DeviceResidual`). The device's rows also widen the envelope for that device: a GPU
whose spec sheet lies outside the trees' range is priced by them, corrected by its own
residual, for the families, dtypes and sizes its rows cover. On AIConfigurator's Blackwell
GPUs (the generation split) this halves the error of the physical model's target tier on
decode attention and MoE.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.kernels._calibration import (
    DEFAULT_OP,
    PhysicsModel,
    _distinct_rows,
    as_default_kernels,
    measurement_ops,
)
from perfcast.kernels._conformal import (
    SCHEMA3_FEATURES,
    IntervalScale,
    device_points,
    fit_scale,
    novelty,
)
from perfcast.kernels._physics import prepare, variants
from perfcast.kernels._residual import NeighbourResidual
from perfcast.kernels._roofline import roofline_times, wave_quantization
from perfcast.ops import COMM_FAMILIES
from perfcast.specs import Device, get_device

__all__ = ["LEARNED", "LEARNED_FILES", "LEARNED_SCHEMA_VERSION", "DeviceResidual",
           "LearnedKernels", "LearnedTimeModel", "add_learned_targets",
           "fit_learned", "learned_target_tier",
           "kernel_features", "learned_time_model", "shipped_learned"]

LEARNED_SCHEMA_VERSION = 4
# 1: the ratio trees r alone (module docstring); 2: intervals not normalised by novelty;
# 3: novelty over the spec sheet alone (kernels._conformal.SCHEMA3_FEATURES)
LEARNED_SCHEMAS = (1, 2, 3, 4)
LEARNED = "learned"  # the uncertainty tier of rows the trees price
# Tensor-core generation per architecture (a number, so trees can split on it).
# (compute capability; AMD's CDNA matrix cores have no place on this scale: NaN, so their
# rows stay with the physical model)
ARCH_GENERATION = {"Pascal": 6.0, "Volta": 7.0, "Turing": 7.5, "Ampere": 8.0,
                   "Ada Lovelace": 8.9, "Hopper": 9.0, "Blackwell": 10.0,
                   "Blackwell Ultra": 10.3}
NUMERIC = ("log_b", "log_m", "log_n", "log_k", "log_flops", "log_bytes", "intensity",
           "log_t_compute", "log_t_memory", "log_blocks_per_sm", "log_waves", "log_t_quant",
           "balance", "size", "occupancy", "depth", "log_flops_per_w", "log_bw_tbps",
           "wave_factor", "sm_count", "log_clock", "log_l2", "l2_fit", "generation")
CATEGORICAL = ("family", "dtype", "variant", "timing")
FEATURES = NUMERIC + CATEGORICAL
# Numeric features whose training range is stored per family and dtype (the envelope). A
# forecast must stay within it (+- ENVELOPE_SLACK in their log units) to be priced by the
# trees rather than the physical model, except for the generation, which must only be on the
# scale (ARCH_GENERATION; its range is kept for the record, `device_coverage`). log_t_quant
# keeps an FP8 GEMM handed already-quantised inputs (`:fused_quant`, no quantisation pass)
# with the physical model, which prices that case: every measured FP8 GEMM includes its pass.
ENVELOPE = ("log_flops", "log_bytes", "log_t_quant", "log_flops_per_w", "log_bw_tbps",
            "generation")
ENVELOPE_SLACK = 1.0
CLIP_QUANTILES = (0.001, 0.999)  # per family, of the training targets
INTERVAL_QUANTILES = (0.05, 0.95)
PARAMS = {"objective": "l1", "learning_rate": 0.05, "num_leaves": 63, "min_data_in_leaf": 20,
          "bagging_fraction": 0.8, "bagging_freq": 1, "feature_fraction": 0.8,
          "deterministic": True, "force_row_wise": True, "num_threads": 2, "seed": 0,
          "verbose": -1}
ROUNDS = 600
# LightGBM threads for prediction: one for small tables (a step's few distinct kernels, where
# waking OpenMP threads costs more than it saves), all cores (0) from PARALLEL_ROWS rows on;
# each row's sum over trees is the same either way.
PARALLEL_ROWS = 20_000
VARIANT_DROPOUT = 0.2  # share of training rows fitted without their variant (see _encode)
# A device's residual trees (DeviceResidual): a few hundred rows, so small trees, fewer rounds;
# kept per family where TARGET_FOLDS-fold cross-validation over the rows says they help;
# below TARGET_MIN_ROWS rows only the nearest-shape residual is fitted
TARGET_PARAMS = {**PARAMS, "learning_rate": 0.1, "num_leaves": 15, "min_data_in_leaf": 10}
TARGET_ROUNDS = 100
TARGET_MIN_ROWS = 20
TARGET_FOLDS = 4
TARGETS = {"booster": "log(measured / roofline·waves)", "seconds_booster": "log(measured)",
           "blend": "w = min(1, exp(-r)): w·r + (1 - w)·(s - log roofline·waves), clipped"}


def _log2(x: np.ndarray) -> np.ndarray:
    return np.log2(np.maximum(np.asarray(x, dtype=float), 1e-30))


def kernel_features(ops: pd.DataFrame, device: Device, timing: np.ndarray) -> pd.DataFrame:
    """FEATURES per op-table row on `device` (timing: how each kernel is timed/launched)."""
    prep = prepare(ops, device, timing)
    flops = ops["flops"].to_numpy(dtype=float)
    traffic = ops["bytes_read"].to_numpy(dtype=float) + ops["bytes_written"].to_numpy(dtype=float)
    n = len(ops)
    out = {f"log_{c}": _log2(np.maximum(ops[c].to_numpy(dtype=float), 1.0))
           for c in ("b", "m", "n", "k")}
    out["log_flops"], out["log_bytes"] = _log2(flops + 1.0), _log2(traffic + 1.0)
    out["intensity"] = out["log_flops"] - out["log_bytes"]
    out["log_t_compute"] = _log2(prep.t_compute + 1e-12)
    out["log_t_memory"] = _log2(prep.t_memory + 1e-12)
    out["log_blocks_per_sm"] = _log2(np.where(np.isfinite(prep.blocks_per_sm),
                                              prep.blocks_per_sm, 0.0) + 1e-9)
    out["log_waves"] = _log2(prep.block_waves + 1.0)
    out["log_t_quant"] = _log2(prep.t_quant + 1e-12)
    for i, name in enumerate(("balance", "size", "occupancy", "depth")):
        out[name] = prep.regime[:, i]
    out["log_flops_per_w"], out["log_bw_tbps"] = prep.log_flops_per_w, prep.log_bw_tbps
    out["wave_factor"] = wave_quantization(ops, device)
    out["sm_count"] = np.full(n, float(device.sm_count or np.nan))
    out["log_clock"] = np.full(n, np.log2(device.boost_clock_hz or np.nan))
    out["log_l2"] = np.full(n, np.log2(device.l2_bytes or np.nan))
    out["l2_fit"] = out["log_bytes"] - out["log_l2"]
    out["generation"] = np.full(n, ARCH_GENERATION.get(device.arch or "", np.nan))
    out["family"] = ops["family"].to_numpy(dtype=object)
    out["dtype"] = ops["dtype"].to_numpy(dtype=object)
    out["variant"] = prep.variant
    out["timing"] = np.asarray(timing, dtype=object)
    return pd.DataFrame(out, index=ops.index)[list(FEATURES)]


def _store_features(rows: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """(features, roofline-with-waves seconds) of measurement-store rows, in rows' order."""
    feats, roof = [], []
    for name, part in rows.groupby("device", sort=True):
        device, ops = get_device(name), measurement_ops(part).set_axis(part.index)
        feats.append(kernel_features(ops, device, part["timing"].to_numpy(dtype=object)))
        roof.append(pd.Series(roofline_times(ops, device, waves=True), index=part.index))
    return pd.concat(feats).loc[rows.index], pd.concat(roof).loc[rows.index].to_numpy()


@dataclass(frozen=True)
class LearnedKernels:
    """A fitted learned kernel model: the trees (LightGBM text), category codes, per-family
    clip bounds, training envelope and conformal interval quantiles, per-device target
    residuals (the target-measured tier), and provenance."""

    booster_text: str  # r: log(measured / roofline·waves)
    categories: dict[str, list[str]]
    clip: dict[str, list[float]]  # family -> [lo, hi] of log(measured / roofline·waves)
    envelope: dict[str, dict]  # family -> dtype -> {"<ENVELOPE feature>": [lo, hi]}
    # family -> [q05, q95] of log(measured / forecast), in units of interval_scale's sigma
    intervals: dict[str, list[float]] = field(default_factory=dict)
    devices: dict[str, DeviceResidual] = field(default_factory=dict)  # target tier
    provenance: dict = field(default_factory=dict)
    seconds_booster_text: str = ""  # s: log(measured seconds); "" in a schema-1 model
    interval_scale: IntervalScale | None = None  # None: bands as they are (schema <= 2)

    def to_json(self) -> str:
        scale = self.interval_scale
        schema = (1 if not self.seconds_booster_text else 2 if scale is None
                  else 3 if scale.features == SCHEMA3_FEATURES else LEARNED_SCHEMA_VERSION)
        data = {"schema_version": schema,
                "provenance": self.provenance, "categories": self.categories,
                "clip": self.clip, "envelope": self.envelope, "intervals": self.intervals,
                "devices": {d: r.to_dict() for d, r in self.devices.items()},
                "booster": self.booster_text}
        if self.seconds_booster_text:
            data["seconds_booster"] = self.seconds_booster_text
        if self.interval_scale is not None:
            data["interval_scale"] = self.interval_scale.to_dict()
        return json.dumps(data, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> LearnedKernels:
        data = json.loads(text)
        if data.get("schema_version") not in LEARNED_SCHEMAS:
            raise InputError("learned_kernels.schema_version",
                             f"got {data.get('schema_version')!r}",
                             " or ".join(map(str, LEARNED_SCHEMAS)))
        schema = data["schema_version"]
        if schema >= 2 and not data.get("seconds_booster"):
            raise InputError("learned_kernels.seconds_booster",
                             f"missing in a schema-{schema} model", "LightGBM model text")
        if schema >= 3 and "interval_scale" not in data:
            raise InputError("learned_kernels.interval_scale",
                             f"missing in a schema-{schema} model", "{a, b, features, points}")
        devices = {d: DeviceResidual.from_dict(r) for d, r in data.get("devices", {}).items()}
        scale = data.get("interval_scale")
        return cls(data["booster"], data["categories"], data["clip"], data["envelope"],
                   data.get("intervals", {}), devices, data["provenance"],
                   data.get("seconds_booster", ""),
                   IntervalScale.from_dict(scale) if schema >= 3 else None)

    def booster(self):
        return _booster(self.booster_text)

    @property
    def fingerprint(self) -> str:
        """Names the trees (a hash of their text): a device residual fitted over one model
        says which, and corrects no other."""
        text = (self.booster_text + "\0" + self.seconds_booster_text).encode()
        return hashlib.sha256(text).hexdigest()[:16]

    def with_target_tier(self, tier: dict) -> LearnedKernels | None:
        """This model plus a stored target tier's residuals; None when they were fitted over
        other trees (another perfcast's shipped model), which they cannot correct."""
        if tier.get("over") != self.fingerprint:
            return None
        own = {d: DeviceResidual.from_dict(r) for d, r in tier.get("devices", {}).items()}
        return replace(self, devices={**self.devices, **own})

    def inside(self, feats: pd.DataFrame, device: str | None = None) -> np.ndarray:
        """Rows within the training envelope of their family and dtype (module docstring),
        or within that of `device`'s own measured rows where it has a residual."""
        ok = _within(self.envelope, feats)
        own = self.device_residual(device)
        return ok | _within(own.envelope, feats) if own is not None else ok

    def device_residual(self, device: str | None) -> DeviceResidual | None:
        """`device`'s own correction (the target-measured tier), None where it has none."""
        return self.devices.get(device) if device else None

    def device_coverage(self, device: Device) -> dict[str, str]:
        """Per family, whether `device`'s spec sheet lies inside the trees' training envelope
        ("learned", saying so when its generation is beyond the trained ones) or which
        feature puts it outside ("physical model: ..."), before any shape is known (shapes
        outside the envelope also fall back, row by row)."""
        gen = ARCH_GENERATION.get(device.arch or "", np.nan)
        bw = float(np.log(device.hbm_bandwidth_bps / 1e12)) if device.hbm_bandwidth_bps else np.nan
        out = {}
        own = self.device_residual(device.name)
        for family, by_dtype in sorted(self.envelope.items()):
            lo = min(e["generation"][0] for e in by_dtype.values())
            hi = max(e["generation"][1] for e in by_dtype.values())
            blo = min(e["log_bw_tbps"][0] for e in by_dtype.values())
            bhi = max(e["log_bw_tbps"][1] for e in by_dtype.values())
            if device.kind == "cpu":
                out[family] = "physical model: a CPU"
            elif own is not None and family in own.envelope:
                out[family] = "learned, with the device's own measured rows"
            elif not np.isfinite(gen):
                out[family] = (f"physical model: {device.arch or 'its architecture'} has no "
                               "tensor-core generation on the trained scale")
            elif not blo - ENVELOPE_SLACK <= bw <= bhi + ENVELOPE_SLACK:
                out[family] = "physical model: memory bandwidth outside the trained range"
            elif not lo <= gen <= hi:
                out[family] = (f"learned, beyond the trained generations {lo:g}-{hi:g} "
                               f"({device.arch})")
            else:
                out[family] = "learned"
        return out

    def interval_sigma(self, feats: pd.DataFrame) -> np.ndarray:
        """Per row, the factor its family's band is multiplied by: sigma(x) of the
        interval scale (kernels._conformal), 1 for a model without one."""
        if self.interval_scale is None:
            return np.ones(len(feats))
        return self.interval_scale.sigma(feats)

    def log_bounds(self, feats: pd.DataFrame) -> np.ndarray:
        """Rows x [low, high] of the conformal 90% band of log(measured / forecast); NaN
        for a family without one."""
        fams = feats["family"].to_numpy(dtype=object)
        band = np.array([self.intervals.get(str(f), [np.nan, np.nan]) for f in fams],
                        dtype=float).reshape(len(fams), 2)
        return band * self.interval_sigma(feats)[:, None]

    def log_correction(self, feats: pd.DataFrame, log_roof: np.ndarray) -> np.ndarray:
        """Clipped log(seconds / roofline·waves) per row (`log_roof`: the natural log of
        each row's roofline-with-waves seconds), the two trees weighted as the module
        docstring says."""
        if not len(feats):
            return np.zeros(0)
        x = _encode(feats, self.categories)
        threads = _threads(len(feats))
        fams = feats["family"].to_numpy(dtype=object)
        lo = np.array([self.clip.get(str(f), [-np.inf, np.inf])[0] for f in fams])
        hi = np.array([self.clip.get(str(f), [-np.inf, np.inf])[1] for f in fams])
        ratio = np.clip(self.booster().predict(x, num_threads=threads), lo, hi)
        if not self.seconds_booster_text:
            return ratio
        seconds = _booster(self.seconds_booster_text).predict(x, num_threads=threads)
        weight = np.minimum(np.exp(-ratio), 1.0)
        return np.clip(weight * ratio + (1.0 - weight) * (seconds - log_roof), lo, hi)


def _within(envelope: dict[str, dict], feats: pd.DataFrame) -> np.ndarray:
    """Rows whose ENVELOPE features lie in `envelope`'s ranges for their family and dtype
    (+- ENVELOPE_SLACK) and whose generation is on the scale (any one: the trees carry their
    shape effects to a generation they never saw, module docstring); False for a pair it
    does not hold."""
    fams = feats["family"].to_numpy(dtype=object)
    dtypes = feats["dtype"].to_numpy(dtype=object)
    ok = np.zeros(len(feats), dtype=bool)
    codes, pairs = pd.factorize(pd.Series(fams.astype(str)) + "|" + dtypes.astype(str))
    for code, pair in enumerate(pairs):
        family, dtype = pair.split("|", 1)
        env = envelope.get(family, {}).get(dtype)
        if env is None:
            continue
        sel = codes == code
        good = np.ones(int(sel.sum()), dtype=bool)
        for name in ENVELOPE:
            x = feats[name].to_numpy(dtype=float)[sel]
            if name == "generation":
                good &= np.isfinite(x)
                continue
            lo, hi = env[name]
            good &= (x >= lo - ENVELOPE_SLACK) & (x <= hi + ENVELOPE_SLACK)
        ok[sel] = good
    return ok


@dataclass(frozen=True)
class DeviceResidual:
    """One device's correction over the trees, from its own measured rows (the target-measured
    tier): residual trees on log(measured / learned forecast) (LightGBM text), then the
    nearest-shape residual of what they leave. `envelope` is that of the rows (where the
    trees price the device whatever its generation); the residual trees correct only rows
    inside it, of the `families` where, in TARGET_FOLDS-fold cross-validation over the rows,
    they beat the nearest-shape residual alone (a few rows a family overfit them); none under
    TARGET_MIN_ROWS rows."""

    neighbour: NeighbourResidual
    booster_text: str = ""
    envelope: dict[str, dict] = field(default_factory=dict)
    families: tuple[str, ...] = ()
    # families left uncorrected: `perfcast calibrate`'s check found the residual no better
    # than the trees alone on held-out rows (`learned_target_tier`); none when fitted
    skip: tuple[str, ...] = ()

    @classmethod
    def fit(cls, ops: pd.DataFrame, feats: pd.DataFrame, log_residual: np.ndarray,
            categories: dict[str, list[str]], seed: int = 0) -> DeviceResidual:
        keys = variants(ops)
        families = _boosted_families(ops, keys, feats, log_residual, categories, seed)
        text, neighbour = _residual_parts(ops, keys, feats, log_residual, categories, seed,
                                          families)
        return cls(neighbour, text, _envelope(feats), families)

    def correction(self, ops: pd.DataFrame, feats: pd.DataFrame,
                   categories: dict[str, list[str]]) -> np.ndarray:
        """log correction per row (`feats`: the rows' kernel_features)."""
        out = self.neighbour.correction(ops, feats["variant"].to_numpy(dtype=object))
        fams = feats["family"].to_numpy(dtype=object)
        own = _within(self.envelope, feats) & np.isin(fams, self.families)
        if self.booster_text and own.any():
            out[own] += _booster(self.booster_text).predict(
                _encode(feats[own], categories), num_threads=_threads(int(own.sum())))
        if self.skip:
            out[np.isin(fams, self.skip)] = 0.0
        return out

    def skipping(self, families: tuple[str, ...]) -> DeviceResidual:
        """This residual with `families` left uncorrected, and out of its envelope (the trees
        then price them on the device only inside their own)."""
        return replace(self, skip=tuple(sorted(families)),
                       envelope={f: e for f, e in self.envelope.items() if f not in families})

    def to_dict(self) -> dict:
        data = {"neighbour": self.neighbour.to_dict(), "booster": self.booster_text,
                "envelope": self.envelope, "families": list(self.families)}
        return data | ({"skip": list(self.skip)} if self.skip else {})

    @classmethod
    def from_dict(cls, data: dict) -> DeviceResidual:
        """Also a file written before the residual trees: a NeighbourResidual's dict alone."""
        if "neighbour" not in data:
            return cls(NeighbourResidual.from_dict(data))
        return cls(NeighbourResidual.from_dict(data["neighbour"]), data.get("booster", ""),
                   data.get("envelope", {}), tuple(data.get("families", ())),
                   tuple(data.get("skip", ())))


def _residual_parts(ops: pd.DataFrame, keys: np.ndarray, feats: pd.DataFrame,
                    log_residual: np.ndarray, categories: dict[str, list[str]], seed: int,
                    families: tuple[str, ...]) -> tuple[str, NeighbourResidual]:
    """Residual trees on `log_residual` (LightGBM text; "" when `families` is empty) and the
    nearest-shape residual of what they leave on the rows of `families` (all of it elsewhere)."""
    if not families:
        return "", NeighbourResidual.fit(ops, keys, log_residual)
    text = _train(feats, log_residual, categories, TARGET_ROUNDS, seed, params=TARGET_PARAMS,
                  dropout=0.0)
    trees = _load_booster(text).predict(_encode(feats, categories), num_threads=1)
    fams = feats["family"].to_numpy(dtype=object)
    rest = log_residual - np.where(np.isin(fams, families), trees, 0.0)
    return text, NeighbourResidual.fit(ops, keys, rest)


def _boosted_families(ops: pd.DataFrame, keys: np.ndarray, feats: pd.DataFrame,
                      log_residual: np.ndarray, categories: dict[str, list[str]],
                      seed: int) -> tuple[str, ...]:
    """Families whose held-out rows the residual trees plus the nearest-shape residual price
    better than the nearest-shape residual alone (mean APE, TARGET_FOLDS folds of rows)."""
    if len(feats) < TARGET_MIN_ROWS:
        return ()
    fams = feats["family"].to_numpy(dtype=object)
    every = tuple(sorted(set(fams)))
    fold = np.random.default_rng(seed).integers(0, TARGET_FOLDS, len(feats))
    alone, boosted = np.zeros(len(feats)), np.zeros(len(feats))
    for k in range(TARGET_FOLDS):
        fit, held = fold != k, fold == k
        if not fit.any() or not held.any():
            continue
        for families, out in (((), alone), (every, boosted)):
            text, neighbour = _residual_parts(ops[fit], keys[fit], feats[fit],
                                              log_residual[fit], categories, seed, families)
            out[held] = neighbour.correction(ops[held], keys[held])
            if text:  # a throwaway fold's trees: not kept in _booster's cache
                out[held] += _load_booster(text).predict(_encode(feats[held], categories),
                                                         num_threads=1)
    err_alone = np.abs(np.expm1(log_residual - alone))
    err_boosted = np.abs(np.expm1(log_residual - boosted))
    return tuple(str(f) for f in every
                 if err_boosted[fams == f].mean() < err_alone[fams == f].mean())


def _threads(rows: int) -> int:
    """LightGBM prediction threads for `rows` rows (PARALLEL_ROWS)."""
    return 0 if rows >= PARALLEL_ROWS else 1


def _load_booster(text: str):
    import lightgbm as lgb

    return lgb.Booster(model_str=text)


_booster = cache(_load_booster)  # the shipped and device trees, parsed once per text


def _encode(feats: pd.DataFrame, categories: dict[str, list[str]],
            dropout: np.ndarray | None = None) -> np.ndarray:
    """Float matrix: numeric features as they are, categories as codes in the stored order
    (NaN where unseen: a never-measured kernel variant is priced as its family's kernels in
    general, which `dropout` rows teach the trees at fit time)."""
    cols = [feats[c].to_numpy(dtype=float) for c in NUMERIC]
    for c in CATEGORICAL:
        codes = pd.Index(categories[c]).get_indexer(feats[c].astype(str).to_numpy())
        col = np.where(codes < 0, np.nan, codes.astype(float))
        if c == "variant" and dropout is not None:
            col = np.where(dropout, np.nan, col)
        cols.append(col)
    return np.column_stack(cols) if cols else np.zeros((0, len(FEATURES)))


def _train(feats: pd.DataFrame, y: np.ndarray, categories: dict[str, list[str]],
           rounds: int, seed: int, params: dict = PARAMS,
           dropout: float = VARIANT_DROPOUT) -> str:
    import lightgbm as lgb

    drop = np.random.default_rng(seed).random(len(feats)) < dropout
    data = lgb.Dataset(_encode(feats, categories, drop), y, feature_name=list(FEATURES),
                       categorical_feature=list(CATEGORICAL), free_raw_data=True)
    booster = lgb.train({**params, "seed": seed}, data, num_boost_round=rounds)
    return booster.model_to_string()


def _fit_trees(feats: pd.DataFrame, y: np.ndarray, log_roof: np.ndarray,
               categories: dict[str, list[str]], rounds: int, seed: int) -> LearnedKernels:
    """Both trees (r on y = log(measured / roofline·waves), s on y + log_roof = log measured
    seconds), clip bounds and envelope; no intervals or device residuals yet."""
    return LearnedKernels(_train(feats, y, categories, rounds, seed), categories,
                          _clip(feats, y), _envelope(feats),
                          seconds_booster_text=_train(feats, y + log_roof, categories, rounds,
                                                      seed))


def _envelope(feats: pd.DataFrame) -> dict[str, dict]:
    """family -> dtype -> ENVELOPE feature -> [min, max] over the training rows."""
    out: dict[str, dict] = {}
    for (family, dtype), part in feats.groupby(["family", "dtype"], sort=True):
        x = {name: part[name].to_numpy(dtype=float) for name in ENVELOPE}
        x = {name: v[np.isfinite(v)] for name, v in x.items()}
        if all(len(v) for v in x.values()):  # a feature never finite: no envelope
            out.setdefault(str(family), {})[str(dtype)] = {
                name: [round(float(v.min()), 6), round(float(v.max()), 6)]
                for name, v in x.items()}
    return out


def _clip(feats: pd.DataFrame, y: np.ndarray) -> dict[str, list[float]]:
    fams = feats["family"].to_numpy(dtype=object)
    return {str(f): [round(float(q), 6) for q in np.quantile(y[fams == f], CLIP_QUANTILES)]
            for f in sorted(set(fams))}


def fit_learned(rows: pd.DataFrame, *, rounds: int = ROUNDS, seed: int = 0,
                interval_folds: int = 4, provenance: dict | None = None) -> LearnedKernels:
    """Fit on measurement-store rows (kernel families; collectives are skipped). Intervals:
    `interval_folds` groups of devices each left out of a refit in turn (0: none)."""
    rows = rows[~rows["family"].isin(COMM_FAMILIES)]
    rows = rows.sort_values(["device", "family"], kind="stable")
    feats, roof = _store_features(rows)
    log_roof = np.log(roof)
    y = np.log(rows["latency_s"].to_numpy(dtype=float)) - log_roof
    categories = {c: sorted(set(feats[c].astype(str))) for c in CATEGORICAL}
    trees = _fit_trees(feats, y, log_roof, categories, rounds, seed)
    devices = sorted(rows["device"].unique())
    prov = {**(provenance or {}), "rows": int(len(rows)), "devices": devices,
            "rounds": rounds, "params": PARAMS, "features": list(FEATURES),
            "targets": TARGETS}
    if not interval_folds or len(devices) < 2:
        return replace(trees, provenance=prov)
    device = rows["device"].to_numpy(dtype=object)
    oof, nov = _grouped_residuals(feats, y, log_roof, device, categories, rounds, seed,
                                  interval_folds)
    a, b = fit_scale(oof, nov, device)
    score = oof / (a + b * nov)  # normalised conformal scores (kernels._conformal)
    fams = feats["family"].to_numpy(dtype=object)
    ok = np.isfinite(score)
    intervals = {str(f): [round(float(q), 6) for q in
                          np.quantile(score[ok & (fams == f)], INTERVAL_QUANTILES)]
                 for f in sorted(set(fams[ok]))}
    prov["interval_folds"] = interval_folds
    return replace(trees, intervals=intervals, provenance=prov,
                   interval_scale=IntervalScale(a, b, device_points(feats, device)))


def _grouped_residuals(feats: pd.DataFrame, y: np.ndarray, log_roof: np.ndarray,
                       device: np.ndarray, categories: dict, rounds: int, seed: int,
                       folds: int) -> tuple[np.ndarray, np.ndarray]:
    """(log(measured / forecast) of each row from a refit that never saw its device, NaN
    where the refit's envelope excludes it; the row's novelty from the refit's devices),
    devices dealt round-robin into `folds` groups."""
    names = sorted(set(device))
    group = {d: i % min(folds, len(names)) for i, d in enumerate(names)}
    fold = np.array([group[d] for d in device])
    out, nov = np.full(len(y), np.nan), np.full(len(y), np.nan)
    for k in sorted(set(fold)):
        held = fold == k
        part = _fit_trees(feats[~held], y[~held], log_roof[~held], categories, rounds, seed)
        inside = part.inside(feats[held])
        pred = part.log_correction(feats[held], log_roof[held])
        out[np.flatnonzero(held)[inside]] = (y[held] - pred)[inside]
        nov[held] = novelty(feats[held], device_points(feats[~held], device[~held]))
    return out, nov


def add_learned_targets(model: LearnedKernels, rows: pd.DataFrame,
                        seed: int = 0) -> LearnedKernels:
    """`model` plus each target device's own correction (`DeviceResidual`) from a sample of
    its rows (store schema): residual trees and nearest-shape interpolation of
    log(measured / learned forecast), the target-measured tier."""
    rows = rows[~rows["family"].isin(COMM_FAMILIES)]
    devices = dict(model.devices)
    for name, part in rows.groupby("device", sort=True):
        ops, feats, resid = _device_residuals(model, part, get_device(name))
        devices[str(name)] = DeviceResidual.fit(ops, feats, resid, model.categories, seed)
    return replace(model, devices=devices)


def _device_residuals(model: LearnedKernels, rows: pd.DataFrame, device: Device
                      ) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """(ops, kernel features, log(measured / the trees' forecast)) of one device's rows."""
    ops = measurement_ops(rows)
    feats = kernel_features(ops, device, rows["timing"].to_numpy(dtype=object))
    log_roof = np.log(roofline_times(ops, device, waves=True))
    pred = log_roof + model.log_correction(feats, log_roof)
    return ops, feats, np.log(rows["latency_s"].to_numpy(dtype=float)) - pred


def _target_checks(model: LearnedKernels, ops: pd.DataFrame, feats: pd.DataFrame,
                   resid: np.ndarray, folds: int, seed: int) -> list[dict]:
    """Per family, the held-out MAPE of the trees alone and of the trees with the device's
    residual (`DeviceResidual` fitted on the other folds of `resid`, `folds` folds drawn
    with `seed`): {"family", "rows", "learned_mape", "calibrated_mape", "kept"}, kept where
    the residual is better."""
    fold = np.random.default_rng(seed).permutation(len(resid)) % folds
    held = np.zeros(len(resid))
    for k in range(folds):
        fit, test = fold != k, fold == k
        if fit.any() and test.any():
            own = DeviceResidual.fit(ops[fit], feats[fit], resid[fit], model.categories, seed)
            held[test] = own.correction(ops[test], feats[test], model.categories)
    fams = feats["family"].to_numpy(dtype=object)
    out = []
    for family in sorted(set(fams)):
        sel = fams == family
        before = float(np.mean(np.abs(np.exp(-resid[sel]) - 1)))
        after = float(np.mean(np.abs(np.exp(held[sel] - resid[sel]) - 1)))
        out.append({"family": str(family), "rows": int(sel.sum()), "learned_mape": before,
                    "calibrated_mape": after, "kept": after < before})
    return out


def learned_target_tier(model: LearnedKernels, rows: pd.DataFrame, device: Device,
                        folds: int = 5, seed: int = 0) -> dict:
    """`device`'s target tier over `model` as a user calibration stores it
    (Calibration.learned): {"over": the trees' fingerprint, "devices": {name: its
    DeviceResidual, fitted on all the rows, the families its held-out check did not keep
    skipped}, "checks": that check per family (`_target_checks`)}; no "over"/"devices"
    where no family passed, {} without kernel rows. `device` may be outside the catalog."""
    rows = rows[~rows["family"].isin(COMM_FAMILIES)]
    if rows.empty:
        return {}
    ops, feats, resid = _device_residuals(model, rows, device)
    checks = _target_checks(model, ops, feats, resid, folds, seed)
    own = DeviceResidual.fit(ops, feats, resid, model.categories, seed).skipping(
        tuple(c["family"] for c in checks if not c["kept"]))
    if not own.envelope:
        return {"checks": checks}
    return {"over": model.fingerprint, "devices": {device.name: own.to_dict()},
            "checks": checks}


class LearnedTimeModel:
    """ExecutionTimeModel: the learned model inside its envelope, `fallback` (the physical
    model) outside it, for collectives and CPUs, and for `measured_families`: families a
    user calibration measured on the device, which its corrections in `fallback` price."""

    def __init__(self, learned: LearnedKernels, fallback: PhysicsModel,
                 measured_families: frozenset[str] = frozenset()):
        self.learned = learned
        self.fallback = fallback
        self.measured_families = frozenset(measured_families)

    def _split(self, ops: pd.DataFrame, device: Device, timing: np.ndarray
               ) -> tuple[np.ndarray, pd.DataFrame]:
        kernel = (~ops["family"].isin(COMM_FAMILIES | self.measured_families).to_numpy()
                  & (device.kind != "cpu"))
        if not kernel.any():
            return kernel, ops.iloc[:0]
        canon = _canonical_ops(ops[kernel], self.learned.categories["variant"])
        feats = kernel_features(canon, device, np.asarray(timing, dtype=object)[kernel])
        trees = self.learned.inside(feats, device.name)
        inside = np.zeros(len(ops), dtype=bool)
        inside[kernel] = trees
        return inside, feats[trees]

    def extrapolating(self, ops: pd.DataFrame, device: Device,
                      timing: np.ndarray | None = None) -> np.ndarray:
        """Kernel rows outside the learned model's envelope (priced by the fallback)."""
        timing = _timing(ops, timing)
        inside, _ = self._split(ops, device, timing)
        kernel = ~ops["family"].isin(COMM_FAMILIES).to_numpy()
        return kernel & ~inside

    def log_bounds(self, ops: pd.DataFrame, device: Device,
                   timing: np.ndarray | None = None) -> np.ndarray:
        """Rows x [low, high]: the 90% band of log(measured / forecast) of each row the
        trees price (LearnedKernels.log_bounds), NaN for the rows the fallback prices."""
        inside, feats = self._split(ops, device, _timing(ops, timing))
        out = np.full((len(ops), 2), np.nan)
        out[inside] = self.learned.log_bounds(feats)
        return out

    def kernel_times(self, ops: pd.DataFrame, device: Device,
                     timing: np.ndarray | None = None) -> np.ndarray:
        """Seconds per row: the trees' inside the envelope, the fallback's elsewhere (the
        fallback prices only those rows). Identical rows (one kernel in many layers or
        configurations) are priced once."""
        timing = _timing(ops, timing)
        codes, first = _distinct_rows(ops, timing)
        if len(first) < len(ops):
            return self._times(ops.iloc[first], device, timing[first])[codes]
        return self._times(ops, device, timing)

    def _times(self, ops: pd.DataFrame, device: Device, timing: np.ndarray) -> np.ndarray:
        inside, feats = self._split(ops, device, timing)
        if not inside.any():
            return np.asarray(self.fallback.kernel_times(ops, device, timing), dtype=float)
        out = np.zeros(len(ops))
        if not inside.all():
            rest = np.flatnonzero(~inside)
            out[rest] = self.fallback.kernel_times(ops.iloc[rest], device,
                                                   np.asarray(timing, dtype=object)[rest])
        sub = ops[inside]
        roof = roofline_times(sub, device, waves=True)
        corr = self.learned.log_correction(feats, np.log(roof))
        own = self.learned.device_residual(device.name)
        if own is not None:
            corr = corr + own.correction(sub, feats, self.learned.categories)
        out[inside] = roof * np.exp(corr)
        return out

    def tier(self, device: Device) -> str:
        """"learned": intervals from the trees' device-held-out residuals (kernels._uncertainty),
        where the trees price some family on `device`; a device outside their envelope, or
        with its own target residuals, keeps the fallback's tier."""
        learned = any(v.startswith("learned")
                      for v in self.learned.device_coverage(device).values())
        if not learned or device.name in self.learned.devices:
            return self.fallback.tier(device)
        return LEARNED

    def notes(self, ops: pd.DataFrame) -> list[str]:
        return self.fallback.notes(ops)


def _timing(ops: pd.DataFrame, timing: np.ndarray | None) -> np.ndarray:
    return (np.full(len(ops), "cuda_graph", dtype=object) if timing is None
            else np.asarray(timing, dtype=object))


def _canonical_ops(ops: pd.DataFrame, known: list[str]) -> pd.DataFrame:
    """Rows whose kernel variant was never measured priced as the family's default kernel,
    as PhysicsModel prices them (kernels._calibration.as_default_kernels)."""
    unknown = ~pd.Series(variants(ops)).isin(known).to_numpy()
    if not unknown.any():
        return ops
    fams = ops["family"].to_numpy(dtype=object)[unknown]
    return as_default_kernels(ops, unknown, [DEFAULT_OP.get(str(f), str(f)) for f in fams])


LEARNED_FILES = {"default": "learned.json", "vllm": "learned_vllm.json",
                 "sglang": "learned_sglang.json"}


@cache
def shipped_learned(source: str = "default") -> LearnedKernels:
    """The learned model fitted on a shipped kernel source (scripts/fit_learned.py)."""
    if source not in LEARNED_FILES:
        raise InputError("kernel_source", f"no learned model for {source!r}",
                         list(LEARNED_FILES))
    path = resources.files("perfcast.kernels") / "data" / LEARNED_FILES[source]
    return LearnedKernels.from_json(Path(str(path)).read_text())


@cache
def learned_time_model(source: str = "default") -> LearnedTimeModel:
    """The shipped learned model of a kernel source over its shipped physical model (one
    instance per source)."""
    from perfcast.kernels._stack import source_time_model

    return LearnedTimeModel(shipped_learned(source), source_time_model(source))
