"""Fit the learned kernel model (perfcast.kernels._learned) on a shipped measurement store.

Run from the repository root: `python scripts/fit_learned.py [--source NAME]`. Writes
src/perfcast/kernels/data/learned[_<source>].json: LightGBM trees as text inside JSON, with the
store's digest, the sampling and the fit parameters as provenance. The same rows per
device x family x dtype as scripts/fit_calibration.py draws for its fit (seed 0), so the
physical backbone and the trees see the same measurements; the conformal intervals come from
refits with devices left out (grouped 4-fold).
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from perfcast.kernels import KERNEL_SOURCES
from perfcast.kernels._learned import LEARNED_FILES, fit_learned
from perfcast.measure import load_store, sample_per_group

TRAIN_PER_GROUP = {"default": 2000}
FRAMEWORK_TRAIN_PER_GROUP = 1200
STORES = Path("src/perfcast/measure/data")
OUT = Path("src/perfcast/kernels/data")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", choices=list(LEARNED_FILES), default="default")
    parser.add_argument("--folds", type=int, default=4, help="device groups for intervals")
    args = parser.parse_args()
    source = KERNEL_SOURCES[args.source]
    store_path = STORES / source.store_file
    per_group = TRAIN_PER_GROUP.get(source.name, FRAMEWORK_TRAIN_PER_GROUP)
    rows = sample_per_group(load_store(source=source.name), per_group, 0)
    provenance = {"store": str(store_path),
                  "store_sha256_16": hashlib.sha256(store_path.read_bytes()).hexdigest()[:16],
                  "seed": 0, "train_rows_per_group": per_group, "kernel_source": source.name,
                  "framework": source.framework, "version": source.version,
                  "script": "scripts/fit_learned.py"}
    model = fit_learned(rows, interval_folds=args.folds, provenance=provenance)
    target = OUT / LEARNED_FILES[source.name]
    target.write_text(model.to_json())
    print(f"wrote {target} ({target.stat().st_size / 1e6:.1f} MB) from {len(rows)} rows; "
          f"intervals: {model.intervals}")


if __name__ == "__main__":
    main()
