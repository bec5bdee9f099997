"""Fit the `linear_attn` kernel family (Gated DeltaNet scan and decode state step) on
AIConfigurator's measured GDN tables and add it to the shipped calibrations.

Run from the repository root (needs ../shared/data):
`python scripts/fit_linear_attn.py` fits `linear_attn` from
`aiconfigurator/systems/data/<system>/linear_attention/<stack>/<ver>/gdn_perf.parquet` with
perfcast's own `fit_calibration` (same physical model, shared residual grid and per-device
corrections as every other family): vLLM tables into calibration_vllm.json, SGLang tables into
calibration_sglang.json, and SGLang's into calibration.json too (AIConfigurator has no
TensorRT-LLM GDN tables; TensorRT-LLM, like SGLang, runs FLA's Triton chunked kernels, while
vLLM runs flashinfer's on Hopper/Blackwell, measured up to 3x faster). Only the
`linear_attn` entries (family, residual grid, per-device corrections) and a provenance entry
are written; every other family's numbers stay byte-identical. Deterministic (seed 0).
`--sample` also rewrites src/perfcast/validate/data/aic_gdn_slice.csv, the stratified sample the
held-out test (tests/kernels/test_linear_attn.py) fits and scores.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.kernels import Calibration, add_target_corrections, fit_calibration
from perfcast.kernels._linear_attn import gdn_store_rows
from perfcast.measure import sample_per_group
from perfcast.validate._serving_step import AIC_DEVICES

SHARED = Path("../shared/data")
TABLES = "aiconfigurator/systems/data/*/linear_attention/*/*/gdn_perf.parquet"
CALIBRATIONS = Path("src/perfcast/kernels/data")
TARGETS = {"calibration_vllm.json": ("vllm",), "calibration_sglang.json": ("sglang",),
           "calibration.json": ("sglang",)}
FAMILY = "linear_attn"
TRAIN_PER_GROUP = 1200  # as the framework stores (scripts/fit_calibration.py)
TARGET_PER_GROUP = 200
SAMPLE = Path("src/perfcast/validate/data/aic_gdn_slice.csv")
SAMPLE_PER_KERNEL = {"chunk": 160, "fused_recurrent": 120, "causal_conv1d": 40}
SAMPLE_SEED = 20261127
SAMPLE_COLUMNS = ["stack", "version", "system", "device", "kernel_source", "phase", "batch_size",
                  "seq_len", "num_tokens", "d_model", "d_conv", "num_k_heads", "head_k_dim",
                  "num_v_heads", "head_v_dim", "latency_s", "source_file"]


def load_tables(shared: Path = SHARED) -> pd.DataFrame:
    """Every gdn_perf table, with perfcast device names and latency in seconds (upstream ms)."""
    parts = []
    for path in sorted(shared.glob(TABLES)):
        system, _, stack, version = path.parts[-5:-1]
        raw = pd.read_parquet(path)
        parts.append(raw.assign(system=system, stack=stack, version=version,
                                device=AIC_DEVICES[system], source=f"aiconfigurator-{stack}",
                                source_file=str(path.relative_to(shared)),
                                latency_s=raw["latency"] / 1e3))
    return pd.concat(parts, ignore_index=True)


def fit_family(tables: pd.DataFrame, stacks: tuple[str, ...]) -> Calibration:
    """`linear_attn` fitted on the scans and state steps of `stacks` (conv rows excluded: the
    short conv is priced as an elementwise kernel)."""
    store = gdn_store_rows(tables[tables["stack"].isin(stacks)].reset_index(drop=True))
    store = store[store["family"] == FAMILY].sort_values("device", kind="stable")
    cal = fit_calibration(sample_per_group(store, TRAIN_PER_GROUP, 0))
    return add_target_corrections(cal, sample_per_group(store, TARGET_PER_GROUP, 1))


def merged(base: Calibration, new: Calibration, provenance: dict) -> Calibration:
    """`base` with `new`'s linear_attn entries (replacing any earlier ones) and a provenance
    entry; nothing else changes."""
    devices = {d: {k: v for k, v in fams.items() if not k.startswith(FAMILY + "/")}
               for d, fams in base.devices.items()}
    for device, fams in new.devices.items():
        devices.setdefault(device, {}).update(
            {k: v for k, v in fams.items() if k.startswith(FAMILY + "/")})
    prov = {**base.provenance, FAMILY: provenance}
    if "devices_by_family" in prov:
        prov["devices_by_family"] = {**prov["devices_by_family"],
                                     FAMILY: sorted(new.devices)}
    return Calibration({**base.families, FAMILY: new.families[FAMILY]},
                       {**base.residuals, FAMILY: new.residuals[FAMILY]}, devices, prov,
                       base.host)


def write_sample(tables: pd.DataFrame) -> None:
    """Up to SAMPLE_PER_KERNEL rows per stack x device x kernel, spread over log2(tokens)."""
    rng = np.random.default_rng(SAMPLE_SEED)
    picks = []
    for (_, _, kernel), part in tables.groupby(["stack", "device", "kernel_source"], sort=True):
        cap = next(v for k, v in SAMPLE_PER_KERNEL.items() if kernel.startswith(k))
        strata = np.floor(np.log2(part["num_tokens"].to_numpy()))
        per = max(cap // len(np.unique(strata)), 1)
        for s in np.unique(strata):
            idx = np.flatnonzero(strata == s)
            picks.extend(part.index[rng.choice(idx, min(per, len(idx)), replace=False)])
    out = tables.loc[sorted(picks), SAMPLE_COLUMNS]
    out.to_csv(SAMPLE, index=False, float_format="%.6g")
    print(f"wrote {SAMPLE} ({len(out)} rows, {SAMPLE.stat().st_size / 1e6:.2f} MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", action="store_true", help="also rewrite " + str(SAMPLE))
    args = parser.parse_args()
    tables = load_tables()
    if args.sample:
        write_sample(tables)
    for name, stacks in TARGETS.items():
        used = tables[tables["stack"].isin(stacks)]
        files = sorted(set(used["source_file"]))
        digest = hashlib.sha256(b"".join((SHARED / f).read_bytes() for f in files))
        provenance = {"tables": files, "tables_sha256_16": digest.hexdigest()[:16],
                      "stacks": list(stacks), "seed": 0, "script": "scripts/fit_linear_attn.py",
                      "train_rows_per_group": TRAIN_PER_GROUP,
                      "target_rows_per_group": TARGET_PER_GROUP}
        path = CALIBRATIONS / name
        cal = merged(Calibration.from_json(path.read_text()), fit_family(tables, stacks),
                     provenance)
        path.write_text(cal.to_json())
        print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
