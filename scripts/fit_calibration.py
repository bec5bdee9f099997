"""Fit a shipped kernel calibration on a shipped measurement store.

Run from the repository root: `python scripts/fit_calibration.py [--source NAME]`.
`--source default` (the default) writes src/perfcast/kernels/data/calibration.json from
kernels.parquet, exactly as before: family parameters and shared residuals fitted on every
device's rows (capped per device x family x dtype, seed 0), plus each measured device's own
corrections (its target-measured tier). `--source vllm` / `--source sglang` fit the same way on
kernels_vllm.parquet / kernels_sglang.parquet into calibration_vllm.json /
calibration_sglang.json (perfcast.kernels.KERNEL_SOURCES), with fewer rows per group (the
residual grids are most of a file's size) and, in the provenance, the devices each
family was measured on. Deterministic: same store, same file. Fused MoE layers
(AIConfigurator `moe`) are fitted as their own family (perfcast.kernels._moe).
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from perfcast.kernels import (
    KERNEL_SOURCES,
    add_target_corrections,
    devices_by_family,
    fit_calibration,
)
from perfcast.measure import load_store, sample_per_group

TRAIN_PER_GROUP = 2000
TARGET_PER_GROUP = 600
# Framework stores: the shared residual grids grow with the fit rows and the per-device
# corrections with the target rows; fewer of both keep calibration_<source>.json < 6 MB.
FRAMEWORK_TRAIN_PER_GROUP = 1200
FRAMEWORK_TARGET_PER_GROUP = 200
STORES = Path("src/perfcast/measure/data")
CALIBRATIONS = Path("src/perfcast/kernels/data")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", choices=list(KERNEL_SOURCES), default="default",
                        help="which shipped store to fit (default: kernels.parquet)")
    source = KERNEL_SOURCES[parser.parse_args().source]
    default = source.name == "default"
    store_path = STORES / source.store_file
    store = load_store(source=source.name)
    train_rows = TRAIN_PER_GROUP if default else FRAMEWORK_TRAIN_PER_GROUP
    target_rows = TARGET_PER_GROUP if default else FRAMEWORK_TARGET_PER_GROUP
    digest = hashlib.sha256(store_path.read_bytes()).hexdigest()[:16]
    provenance = {"store": str(store_path), "store_sha256_16": digest, "seed": 0,
                  "train_rows_per_group": train_rows,
                  "target_rows_per_group": target_rows,
                  "sources": sorted(store["source"].unique())}
    if not default:  # the default calibration's provenance stays as it was
        provenance |= {"kernel_source": source.name, "framework": source.framework,
                       "version": source.version, "devices_by_family": devices_by_family(store)}
    cal = fit_calibration(sample_per_group(store, train_rows, 0), provenance=provenance)
    cal = add_target_corrections(cal, sample_per_group(store, target_rows, 1))
    target = CALIBRATIONS / source.calibration_file
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(cal.to_json())
    print(f"wrote {target} ({target.stat().st_size / 1e6:.1f} MB), devices: "
          f"{', '.join(sorted(cal.devices))}")


if __name__ == "__main__":
    main()
