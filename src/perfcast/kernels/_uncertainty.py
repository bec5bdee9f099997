"""Forecast intervals from the held-out error of the kernel tier that priced each kernel.

Per tier and family (kernels/data/uncertainty.json, scripts/fit_uncertainty.py): sigma_log,
the spread of one kernel's log error, and rho, the share of it common to all kernels of the
family on a device. A priced op table's kernel seconds get variance
    sum over families f of  rho_f (sum_i s_i)^2 + (1 - rho_f) sum_i s_i^2,
with s_i = sigma_f x (row i's seconds, all `count` repeats: one kernel repeated errs alike),
so a family's error grows with N when its kernels err together and with sqrt(N) when not.
The interval is log-normal around the forecast: t x exp(-+ z sqrt(var) / t).
Tier `learned` (kernels priced by the learned model, perfcast.kernels._learned): sigma_log is
each family's split-conformal 90% band of log(measured / forecast) on devices left out of the
trees' fit, half its width over z(0.95), so a one-kernel interval covers what the held-out
devices showed; that band is per unit of the device's novelty scale (kernels._conformal), by
which step_interval multiplies it; rho is the cross-generation tier's (how much a family
errs alike on a device).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from statistics import NormalDist

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.ops import COMM_FAMILIES
from perfcast.specs import Device

__all__ = ["UNCERTAINTY_TIERS", "family_uncertainty", "step_interval"]

UNCERTAINTY_TIERS = ("roofline", "cross_generation", "target_measured", "learned")
# Collectives are not in the kernel validation; their alpha-beta model's error is taken as
# this spread, fully shared (one link model prices them all).
COMM_SIGMA_LOG = 0.2


@cache
def _table() -> dict:
    path = resources.files("perfcast.kernels") / "data" / "uncertainty.json"
    return json.loads(path.read_text())["tiers"]


def family_uncertainty(tier: str, family: str) -> tuple[float, float]:
    """(sigma_log, rho) of one family's kernels under a tier (tier `learned`: sigma per unit
    of the device's novelty scale, module docstring)."""
    table = _table()
    if tier not in table and tier != "learned":
        raise InputError("tier", f"no uncertainty for {tier!r}", list(UNCERTAINTY_TIERS))
    if family in COMM_FAMILIES:
        return COMM_SIGMA_LOG, 1.0
    fams = table["cross_generation" if tier == "learned" else tier]
    entry = fams.get(family, fams["default"])
    sigma, rho = float(entry["sigma_log"]), float(entry["rho"])
    if tier == "learned":
        sigma = _learned_sigma().get(family, sigma)
    return sigma, rho


def _learned_scale(priced: pd.DataFrame, device: Device | None) -> np.ndarray:
    """Per row, the shipped learned model's novelty scale on `device` for the row's dtype
    (collectives: 1, their sigma is COMM_SIGMA_LOG's)."""
    from perfcast.kernels._learned import kernel_features, shipped_learned

    if device is None:
        raise ValueError("step_interval: tier 'learned' needs the device")
    out = np.ones(len(priced))
    kernel = ~priced["family"].isin(COMM_FAMILIES).to_numpy()
    if kernel.any():  # the scale depends on the device and dtype alone: one row per dtype
        rows = priced[kernel]
        uniq = rows.drop_duplicates("dtype")
        feats = kernel_features(uniq, device, np.full(len(uniq), "cuda_graph", dtype=object))
        sigma = dict(zip(uniq["dtype"].astype(str), shipped_learned().interval_sigma(feats),
                         strict=True))
        out[kernel] = [sigma[str(d)] for d in rows["dtype"]]
    return out


@cache
def _learned_sigma() -> dict[str, float]:
    """Per family, half the width of the shipped learned model's conformal 90% band of
    log errors over z(0.95): the log-normal sigma with that band."""
    from perfcast.kernels._learned import shipped_learned

    z = NormalDist().inv_cdf(0.95)
    return {f: (hi - lo) / (2 * z) for f, (lo, hi) in shipped_learned().intervals.items()}


def step_interval(priced: pd.DataFrame, tier: str, level: float = 0.9,
                  fixed_s: float = 0.0, device: Device | None = None) -> tuple[float, float]:
    """(low, high) seconds of a priced op table's total (`total_s` column) plus `fixed_s`
    of time without a kernel error (host, exposed launches). Tier `learned` needs the
    `device`, whose distance from the trees' GPUs scales each kernel's sigma."""
    if not 0 < level < 1:
        raise InputError("level", f"must be in (0, 1), got {level}", "0 < level < 1")
    total = float(priced["total_s"].sum())
    if total <= 0:
        return fixed_s, fixed_s
    scale = _learned_scale(priced, device) if tier == "learned" else np.ones(len(priced))
    var = 0.0
    for family, pos in priced.groupby("family", sort=False).indices.items():
        sigma, rho = family_uncertainty(tier, str(family))
        s = sigma * scale[pos] * priced["total_s"].to_numpy(dtype=float)[pos]
        var += rho * float(s.sum()) ** 2 + (1 - rho) * float(np.sum(s**2))
    z = NormalDist().inv_cdf(0.5 + level / 2)
    rel = np.sqrt(var) / total
    return total * float(np.exp(-z * rel)) + fixed_s, total * float(np.exp(z * rel)) + fixed_s
