"""Fit the per-step host (CPU) overhead of a vLLM-v0-style engine from Vidur's measurements.

Run from the repository root: `python scripts/fit_host_overhead.py [SHARED_DATA_DIR]`.
Writes src/perfcast/compose/data/host_overhead.json: host_s = base_s + per_seq_s * batch
(+ tp_extra_s when tp > 1), least squares over the median columns of
vidur-profiling/legacy/profiling/<gpu>/cpu_overheads.csv (schedule + sampler + prepare inputs
+ process outputs, the CPU work between two forward passes).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

PARTS = ["schedule_median", "sampler_e2e_median", "prepare_inputs_e2e_median",
         "process_model_outputs_median"]


def fit(csv: Path) -> dict:
    df = pd.read_csv(csv)
    df["host_ms"] = df[PARTS].sum(axis=1)
    tp1 = df[df["tensor_parallel_degree"] == 1]
    slope, base = np.polyfit(tp1["batch_size"], tp1["host_ms"], 1)
    multi = df[df["tensor_parallel_degree"] > 1]
    extra = float(np.median(multi["host_ms"] - (base + slope * multi["batch_size"])))
    resid = tp1["host_ms"] - (base + slope * tp1["batch_size"])
    return {"base_s": base / 1e3, "per_seq_s": slope / 1e3, "tp_extra_s": extra / 1e3,
            "rows": len(df), "tp1_rmse_s": float(np.sqrt((resid**2).mean())) / 1e3,
            "source": f"shared/data/vidur-profiling/{csv.relative_to(csv.parents[3])} "
                      "(microsoft/vidur commit 6d98aa8, MIT)"}


def main() -> None:
    shared = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data")
    root = shared / "vidur-profiling/legacy/profiling"
    out = {"engine": "vllm-v0", "model": "host_s = base_s + per_seq_s * batch (+ tp_extra_s)",
           "fits": {gpu: fit(root / gpu / "cpu_overheads.csv") for gpu in ("a100", "a40")}}
    target = Path("src/perfcast/compose/data/host_overhead.json")
    target.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
