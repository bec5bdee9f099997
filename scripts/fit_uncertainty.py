"""Fit the kernel-forecast uncertainty shipped in src/perfcast/kernels/data/uncertainty.json.

From held-out kernel forecasts (the validation splits: devices the fit never saw, and for the
target-measured tier the 90% of a device's rows its 10% sample did not include), per tier and
kernel family:
  sigma_log  root-mean-square of log(predicted / measured): the spread of one kernel's error,
             bias included (an interval is centred on the forecast)
  rho        the share of that variance common to kernels of the family that sit close
             together on one device (sum of n_g * mean_g^2 over groups g = held-out device x
             octave of FLOPs x octave of bytes, over sum of r^2): how strongly the kernels of
             a model's layer, which share a size, err together, so a step's family error grows
             with N (rho = 1) rather than sqrt(N) (rho = 0)

    python scripts/fit_uncertainty.py [--train-rows 1000] [--test-rows 1500]
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from perfcast.measure import load_store
from perfcast.validate import kernel_residuals

OUT = Path(__file__).resolve().parents[1] / "src" / "perfcast" / "kernels" / "data"
SPLITS = ["neusight", "generation", "loo:vidur", "loo:neusight"]


def _octave(values) -> np.ndarray:
    return np.floor(np.log2(np.maximum(values, 1.0))).astype(int).astype(str)


def _stats(r: np.ndarray, groups: np.ndarray) -> dict:
    total = float(np.sum(r**2))
    common = sum(float(np.sum(groups == g)) * float(np.mean(r[groups == g])) ** 2
                 for g in np.unique(groups))
    return {"sigma_log": float(np.sqrt(total / len(r))), "rho": common / max(total, 1e-30),
            "n": int(len(r))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--train-rows", type=int, default=1000)
    ap.add_argument("--test-rows", type=int, default=1500)
    args = ap.parse_args()
    res = kernel_residuals(load_store(), SPLITS, args.train_rows, args.test_rows, seed=0,
                           progress=lambda done, total: print(f"held-out device {done}/{total}"))
    res = res[np.isfinite(res["log_ratio"])]
    tiers: dict[str, dict] = {}
    for (method, family), g in res.groupby(["method", "family"], sort=True):
        groups = (g["split"] + "/" + g["device"] + "/" + _octave(g["flops"]) + "/"
                  + _octave(g["bytes"])).to_numpy(dtype=object)
        tiers.setdefault(method, {})[family] = _stats(g["log_ratio"].to_numpy(), groups)
    for fams in tiers.values():
        fams["default"] = {k: float(np.median([f[k] for f in fams.values()]))
                           for k in ("sigma_log", "rho")}
    doc = {"schema_version": 1, "tiers": tiers, "provenance": {
        "built": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "script": "scripts/fit_uncertainty.py", "splits": SPLITS,
        "train_rows_per_group": args.train_rows, "test_rows_per_group": args.test_rows,
        "data": "perfcast.measure shipped store (see measure/data/README.md)"}}
    (OUT / "uncertainty.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    for method, fams in tiers.items():
        print(method, {f: round(v["sigma_log"], 3) for f, v in fams.items()})


if __name__ == "__main__":
    main()
