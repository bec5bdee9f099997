"""Intervals whose width follows how far a GPU lies from the ones the trees were fitted on.

Split-conformal intervals pooled over held-out devices are right on average and wrong on
every device: a GPU with a sibling in the fit (B200 beside GB200) lands inside its family's
band 98% of the time, one with none (L40S, RTX PRO 6000) 50-60%. Normalised conformal
prediction (Papadopoulos et al. 2008; Lei et al. 2018, sec. 5.2) divides each held-out residual
by a difficulty sigma(x) before taking the quantiles and multiplies the band by sigma(x) again
at forecast time; coverage stays what the quantiles say over exchangeable devices, and the
width moves to where the error is. Here

    novelty(x) = distance, in octaves, from the row's device to the nearest fitted device
                 over the spec-sheet features the trees see (NOVELTY_FEATURES), same dtype
    sigma(x)   = a + b * novelty(x)

The tensor-core generation counts too, a generation as an octave (each of Ampere, Hopper and
Blackwell doubled the dense tensor FLOP/s per SM per clock), by how far a GPU's generation
lies *outside* the fitted ones: a GPU of a generation the trees never saw (priced by them
since its spec sheet lies in their range) is that much farther from every fitted one, and the
refits' slope sees it where a held-out device is the first or last of the generations; one
between two fitted generations (Ada between Ampere and Hopper) is as far as its spec sheet
says, the trees splitting on the generation there. A model fitted before the generation
counted (schema 3, points of five features) measures novelty over the features it stored, as
it was fitted.

with a, b a line through each held-out device's 90th percentile of |log error| against its
novelty, fitted on the refits' held-out residuals alone (`fit_scale`; b >= 0, a >= A_FLOOR).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from perfcast.errors import InputError

__all__ = ["IntervalScale", "NOVELTY_FEATURES", "device_points", "fit_scale", "novelty"]

# kernel_features columns -> factor to octaves (the first two are natural logs, sm_count a
# count, log_clock and log_l2 already log2, generation one octave a generation: docstring).
# The first is per dtype (left out against another dtype's points, `novelty`).
NOVELTY_FEATURES = {"log_flops_per_w": 1 / np.log(2), "log_bw_tbps": 1 / np.log(2),
                    "sm_count": None, "log_clock": 1.0, "log_l2": 1.0, "generation": 1.0}
# the features of the first novelty-scaled models (before the generation counted)
SCHEMA3_FEATURES = ("log_flops_per_w", "log_bw_tbps", "sm_count", "log_clock", "log_l2")
SPREAD_QUANTILE = 0.9  # each held-out device's spread: this quantile of |log error|
A_FLOOR = 0.05  # sigma at zero novelty never below this (a 5% log error)
# a slope needs this many held-out devices spread over this many octaves of novelty (two
# devices fix a line exactly, noise included; two at one novelty fix none)
SLOPE_MIN_DEVICES = 3
SLOPE_MIN_RANGE = 0.25


def _octaves(feats: pd.DataFrame, features: tuple[str, ...] = tuple(NOVELTY_FEATURES)
             ) -> np.ndarray:
    """Rows x `features` (of NOVELTY_FEATURES) in octaves (NaN where the spec sheet lacks a
    number)."""
    cols = []
    for name in features:
        factor = NOVELTY_FEATURES[name]
        x = feats[name].to_numpy(dtype=float)
        cols.append(np.log2(np.where(x > 0, x, np.nan)) if factor is None else x * factor)
    return np.column_stack(cols)


def device_points(feats: pd.DataFrame, device: np.ndarray) -> dict[str, list[list[float]]]:
    """Per dtype, the distinct octave vectors of the devices in `feats` (rows of `device`):
    the reference a forecast's novelty is measured from."""
    x = _octaves(feats)
    dtypes = feats["dtype"].astype(str).to_numpy()
    out: dict[str, list[list[float]]] = {}
    frame = pd.DataFrame({"dtype": dtypes, "device": np.asarray(device, dtype=object)})
    for (dtype, _), pos in sorted(frame.groupby(["dtype", "device"]).indices.items()):
        out.setdefault(str(dtype), []).append([round(float(v), 6) for v in x[pos[0]]])
    return out


def novelty(feats: pd.DataFrame, points: dict[str, list[list[float]]],
            features: tuple[str, ...] = tuple(NOVELTY_FEATURES)) -> np.ndarray:
    """Per row, the Euclidean distance in octaves to the nearest reference point of its
    dtype over the spec-sheet `features` (the points' coordinates; features missing on
    either side left out of the sum), and in quadrature with it how far the row's
    generation lies outside the points' generations (none between two fitted ones: trees
    split on the generation, and extrapolate flat beyond it). A dtype without points is
    measured against every dtype's points without the per-dtype FLOP/s-per-watt feature."""
    x = _octaves(feats, features)
    gen = np.array([f == "generation" for f in features])
    dtypes = feats["dtype"].astype(str).to_numpy()
    out = np.full(len(feats), np.nan)
    every = np.array([p for ps in points.values() for p in ps], dtype=float).reshape(-1, x.shape[1])
    for dtype in np.unique(dtypes):
        sel = dtypes == dtype
        ref = np.array(points.get(dtype, []), dtype=float).reshape(-1, x.shape[1])
        mask = ~gen
        if not len(ref):
            ref, mask = every, ~gen & np.array([f != "log_flops_per_w" for f in features])
        if not len(ref):
            continue
        diff = (x[sel][:, None, :] - ref[None, :, :])[:, :, mask]
        squared = np.nansum(diff**2, axis=2).min(axis=1)
        if gen.any():
            squared += _beyond(x[sel][:, gen][:, 0], ref[:, gen][:, 0]) ** 2
        out[sel] = np.sqrt(squared)
    return out


def _beyond(value: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """How far each value lies outside [min, max] of the finite `ref` (0 inside; 0 where
    either side is NaN: a generation off the scale adds nothing)."""
    ref = ref[np.isfinite(ref)]
    if not len(ref):
        return np.zeros(len(value))
    gap = np.maximum(np.maximum(ref.min() - value, value - ref.max()), 0.0)
    return np.nan_to_num(gap, nan=0.0)


@dataclass(frozen=True)
class IntervalScale:
    """sigma(x) = a + b * novelty(x) over `points` (the fitted devices), module docstring."""

    a: float = 1.0
    b: float = 0.0
    points: dict[str, list[list[float]]] = field(default_factory=dict)
    features: tuple[str, ...] = tuple(NOVELTY_FEATURES)  # the points' coordinates

    def novelty(self, feats: pd.DataFrame) -> np.ndarray:
        return novelty(feats, self.points, self.features)

    def sigma(self, feats: pd.DataFrame) -> np.ndarray:
        if not self.b:
            return np.full(len(feats), self.a)
        n = self.novelty(feats)
        return self.a + self.b * np.nan_to_num(n, nan=float(np.nanmax(n, initial=0.0)))

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "features": list(self.features),
                "points": self.points}

    @classmethod
    def from_dict(cls, data: dict) -> IntervalScale:
        """A stored scale; its `features` as stored (a file written before the generation
        counted has SCHEMA3_FEATURES), refused when one is not a NOVELTY_FEATURES name or a
        point has not one number per feature."""
        features = tuple(data.get("features", SCHEMA3_FEATURES))
        unknown = [f for f in features if f not in NOVELTY_FEATURES]
        if unknown:
            raise InputError("learned_kernels.interval_scale.features",
                             f"unknown novelty feature(s) {unknown}", list(NOVELTY_FEATURES))
        points = data.get("points", {})
        if any(len(p) != len(features) for ps in points.values() for p in ps):
            raise InputError("learned_kernels.interval_scale.points",
                             f"a point without one number per feature {list(features)}",
                             f"lists of {len(features)} numbers")
        return cls(float(data["a"]), float(data["b"]), points, features)


def fit_scale(residual: np.ndarray, nov: np.ndarray, device: np.ndarray) -> tuple[float, float]:
    """(a, b): the weighted least-squares line of each device's SPREAD_QUANTILE of |residual|
    on its median novelty (weights sqrt(rows)); b = 0 (a the mean spread) where fewer than
    SLOPE_MIN_DEVICES devices span SLOPE_MIN_RANGE octaves, or where the slope comes out
    negative; a >= A_FLOOR."""
    ok = np.isfinite(residual) & np.isfinite(nov)
    frame = pd.DataFrame({"r": np.abs(residual[ok]), "n": nov[ok],
                          "d": np.asarray(device, dtype=object)[ok]})
    if frame.empty:
        return 1.0, 0.0
    per = frame.groupby("d").agg(n=("n", "median"), q=("r", lambda r: np.quantile(
        r, SPREAD_QUANTILE)), w=("r", "size"))
    w = np.sqrt(per["w"].to_numpy(dtype=float))
    if len(per) < SLOPE_MIN_DEVICES or np.ptp(per["n"]) < SLOPE_MIN_RANGE:
        return max(float(np.average(per["q"], weights=w)), A_FLOOR), 0.0
    b, a = np.polyfit(per["n"].to_numpy(dtype=float), per["q"].to_numpy(dtype=float), 1, w=w)
    if b < 0:
        b, a = 0.0, float(np.average(per["q"], weights=w))
    return round(max(float(a), A_FLOOR), 6), round(float(b), 6)
