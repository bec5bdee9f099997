"""Fit the shipped kernel calibration on the shipped measurement store.

Run from the repository root: `python scripts/fit_calibration.py`. Writes
src/perfcast/kernels/data/calibration.json: family parameters and shared residuals fitted on
every device's rows (capped per device x family x dtype, seed 0), plus each measured device's
own corrections (its target-measured tier). Deterministic: same store, same file. Fused MoE
layers (AIConfigurator `moe`) are fitted as their own family (perfcast.kernels._moe); every
other family's parameters come out as before, since each family is fitted on its own rows.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from perfcast.kernels import add_target_corrections, fit_calibration
from perfcast.measure import load_store, sample_per_group

TRAIN_PER_GROUP = 2000
TARGET_PER_GROUP = 600
STORE = Path("src/perfcast/measure/data/kernels.parquet")


def main() -> None:
    store = load_store()
    digest = hashlib.sha256(STORE.read_bytes()).hexdigest()[:16]
    provenance = {"store": str(STORE), "store_sha256_16": digest, "seed": 0,
                  "train_rows_per_group": TRAIN_PER_GROUP,
                  "target_rows_per_group": TARGET_PER_GROUP,
                  "sources": sorted(store["source"].unique())}
    cal = fit_calibration(sample_per_group(store, TRAIN_PER_GROUP, 0), provenance=provenance)
    cal = add_target_corrections(cal, sample_per_group(store, TARGET_PER_GROUP, 1))
    target = Path("src/perfcast/kernels/data/calibration.json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(cal.to_json())
    print(f"wrote {target} ({target.stat().st_size / 1e6:.1f} MB), devices: "
          f"{', '.join(sorted(cal.devices))}")


if __name__ == "__main__":
    main()
