"""Sample AIConfigurator's measured GEMM latencies into a small CSV that perfcast ships.

Run from the repository root: `python scripts/build_gemm_slice.py [SHARED_DATA_DIR]` (default
`../shared/data`; needs pyarrow to read parquet, perfcast itself does not).
Writes src/perfcast/validate/data/aic_gemm_slice.csv and its README.md: per system with a
perfcast catalog device and per dtype (bf16, plain fp8, nvfp4 -> fp4), a seeded sample
stratified over log2(m), so memory-bound small-m and compute-bound large-m shapes weigh alike.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

SEED = 20260821
PER_STRATUM = 24  # rows per (system, dtype, floor(log2 m)) stratum; <= 16 strata -> <= 384 rows
SYSTEMS = {  # AIConfigurator system dir -> perfcast catalog device (b60 has no catalog entry)
    "a100_sxm": "a100-sxm4-80gb",
    "h100_sxm": "h100-sxm",
    "h200_sxm": "h200-sxm",
    "b200_sxm": "b200-sxm",
    "b300_sxm": "b300-sxm",
    "gb200": "gb200",
    "gb300": "gb300",
    "l40s": "l40s",
    "rtx_pro_6000_server": "rtx-pro-6000",
}
DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "nvfp4": "fp4"}  # fp8_block, *_wo, sq left out
COLUMNS = [
    "source",
    "system",
    "device",
    "dtype",
    "m",
    "n",
    "k",
    "latency_s",
    "timing",
    "source_file",
]
OUT = Path("src/perfcast/validate/data")


def sample(parquet: Path, shared: Path, system: str, rng: np.random.Generator) -> pd.DataFrame:
    """Stratified sample of one system's gemm_perf table, in perfcast's units and names."""
    df = pd.read_parquet(parquet, columns=["gemm_dtype", "m", "n", "k", "latency"])
    df = df[df["gemm_dtype"].isin(DTYPES) & (df["latency"] > 0)]
    df = df.sort_values(["gemm_dtype", "m", "n", "k"], kind="stable").reset_index(drop=True)
    df["stratum"] = np.floor(np.log2(df["m"])).astype(int)
    picks = []
    for _, grp in df.groupby(["gemm_dtype", "stratum"], sort=True):
        take = min(PER_STRATUM, len(grp))
        picks.append(grp.iloc[np.sort(rng.choice(len(grp), size=take, replace=False))])
    out = pd.concat(picks, ignore_index=True)
    return pd.DataFrame(
        {
            "source": "aiconfigurator",
            "system": system,
            "device": SYSTEMS[system],
            "dtype": out["gemm_dtype"].map(DTYPES),
            "m": out["m"],
            "n": out["n"],
            "k": out["k"],
            "latency_s": out["latency"] / 1e3,
            "timing": "cuda_graph",
            "source_file": parquet.relative_to(shared).as_posix(),
        }
    )[COLUMNS]


def readme(df: pd.DataFrame, size: int) -> str:
    counts = df.pivot_table(
        index="system", columns="dtype", values="m", aggfunc="size", fill_value=0
    ).reindex(columns=["bf16", "fp8", "fp4"], fill_value=0)
    table = "\n".join(
        f"| {s} | {SYSTEMS[s]} | " + " | ".join(str(v) for v in row) + " |"
        for s, row in zip(counts.index, counts.to_numpy(), strict=True)
    )
    return f"""# Shipped validation data

## aic_gemm_slice.csv ({len(df):,} rows, {size / 1e6:.2f} MB)

Measured GEMM latencies Y[m,n] = X[m,k]·W[n,k]ᵀ sampled from NVIDIA AIConfigurator's silicon
performance database (https://github.com/ai-dynamo/aiconfigurator, commit `095f58a51c4c`,
`aic-core/src/aiconfigurator_core/systems/data/<system>/gemm/trtllm/<ver>/gemm_perf.parquet`;
Apache-2.0, copyright NVIDIA). TensorRT-LLM "torch flow" kernels, clocks locked, replayed under
CUDA graphs and timed with CUDA events (`timing = cuda_graph`); plain-fp8 GEMMs without an input
scale include the dynamic-quantisation kernel. Upstream `latency` (ms) is stored as `latency_s`.

Sampling (`python scripts/build_gemm_slice.py`, seed {SEED}): systems with a perfcast catalog
device; dtypes `bfloat16` -> bf16, `fp8` -> fp8 (not `fp8_block`), `nvfp4` -> fp4 where present.
Per system x dtype, the rows are split into strata by floor(log2 m) (m = 1 ... 32768) and up to
{PER_STRATUM} rows are drawn without replacement from each, so small-m memory-bound and large-m
compute-bound shapes are equally represented. `source_file` is relative to `shared/data`.

| system | device | bf16 | fp8 | fp4 |
|---|---|---|---|---|
{table}
"""


def main() -> None:
    shared = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data")
    rng = np.random.default_rng(SEED)
    frames = []
    for system in SYSTEMS:  # fixed order: the rng stream, hence the sample, is reproducible
        files = sorted(
            (shared / "aiconfigurator/systems/data" / system / "gemm/trtllm").glob(
                "*/gemm_perf.parquet"
            )
        )
        if len(files) != 1:
            raise SystemExit(f"{system}: expected one trtllm gemm_perf.parquet, got {files}")
        frames.append(sample(files[0], shared, system, rng))
    df = pd.concat(frames, ignore_index=True)
    OUT.mkdir(parents=True, exist_ok=True)
    csv = OUT / "aic_gemm_slice.csv"
    df.to_csv(csv, index=False, float_format="%.6g")
    (OUT / "README.md").write_text(readme(df, csv.stat().st_size))
    print(df.groupby(["system", "dtype"]).size().to_string())
    print(f"{len(df)} rows, {csv.stat().st_size / 1e6:.2f} MB -> {csv}")


if __name__ == "__main__":
    main()
