"""Derive the shipped end-to-end serving points (src/perfcast/validate/data/serving_points.csv)
from AIConfigurator's measured silicon sample (shared/data/aiconfigurator/systems/
silicon_sample_dev.csv): aggregated (not disaggregated) rows of models (dense, and MoE whose
real HF config.json perfcast ships) and GPUs that perfcast has in its catalogs, one row per
measured point, TTFT/TPOT in seconds.

MoE rows keep their parallel layout: `dp` (attention_dp_size), `ep` (moe_ep_size), `moe_tp`
(moe_tp_size); rows whose layout is not one node's (tp x dp != moe_tp x ep, or more than 8
GPUs: tp_size 16/64 rows) are left out. `arch` says dense or moe. A checkpoint name maps to
the catalog model of its architecture but keeps its own `model` label (deepseek-r1 rows are
served with deepseek-v3's config, and reported apart from deepseek-v3's).

Concurrency (requests the benchmark client keeps in flight) comes from `silicon_data_source`
('silicon_concurrency=N'), else the id's `_cNN_`, else `batch_size` (7 rows whose id reads
`_c_`); `concurrency_source` says which. Rows without a precision are served from the BF16
HF checkpoint (`precision_source` = 'assumed-bf16'). Judge-only data: nothing is fitted to it.

Disaggregated rows go to serving_disagg_points.csv: each pool's workers, and per worker its
attention TP `tp`, attention-DP ranks `dp`, experts over `ep` x `moe_tp`, `batch` (prefill or
decode batch size per attention-DP rank). Workers whose layout perfcast's ParallelPlan cannot
express (expert TP across attention-DP ranks without EP: moe_tp x ep != tp x dp) or that
span more than 16 GPUs are left out (15 rows; 5 more repeat others), and so are the 393
rows without worker or batch counts (the deployment's GPU count is unknown). Concurrency
comes from the id's `_cNN_` (equal, where both exist, to decode batch x decode workers x
decode attention-DP ranks).

    python scripts/build_serving_points.py [--shared ../shared/data]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.specs import device_names, get_model

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "src" / "perfcast" / "validate" / "data" / "serving_points.csv"
OUT_DISAGG = OUT.with_name("serving_disagg_points.csv")
POOL_MAX_GPUS = 16  # one worker: at most two 8-GPU nodes
SOURCE = "aiconfigurator/systems/silicon_sample_dev.csv"
DEVICES = {"h100_sxm": "h100-sxm", "b200_sxm": "b200-sxm"}
CHECKPOINTS = {"nvidia/Qwen3-32B-NVFP4": "Qwen/Qwen3-32B"}  # quantised copy -> base model
# checkpoint -> (point label, catalog model of the same architecture)
MOE_CHECKPOINTS = {"deepseek-ai/DeepSeek-V3": "deepseek-v3",
                   "deepseek-ai/DeepSeek-R1": "deepseek-r1",
                   "nvidia/DeepSeek-R1-NVFP4": "deepseek-r1",
                   "nvidia/DeepSeek-V3.1-NVFP4": "deepseek-v3.1",
                   "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b",
                   # issue 20: architectures read from their configs' features
                   "openai/gpt-oss-120b": "gpt-oss-120b",
                   "MiniMaxAI/MiniMax-M2.5": "minimax-m2.5",
                   "Qwen/Qwen3.5-397B-A17B": "qwen3.5-397b-a17b",
                   "moonshotai/Kimi-K2.5": "kimi-k2.5",
                   "zhipuai/GLM-5": "glm-5.1"}
NODE_GPUS = 8  # every silicon_sample_dev row ran on one 8-GPU H100/B200 node
PRECISIONS = {"bf16": "bf16", "fp8": "fp8", "fp4": "fp4", "int4": "int4"}  # int4: int4_wo


def _catalog_model(hf_id: str) -> str | None:
    """The point's model label: a dense catalog decoder behind an HF id, an MoE checkpoint of
    MOE_CHECKPOINTS (checked to resolve to a catalog MoE model), else None."""
    if hf_id in MOE_CHECKPOINTS:
        assert get_model(MOE_CHECKPOINTS[hf_id]).moe is not None, hf_id
        return MOE_CHECKPOINTS[hf_id]
    try:
        m = get_model(CHECKPOINTS.get(hf_id, hf_id))
    except InputError:
        return None
    return m.name if m.moe is None and m.mla is None and m.kind == "decoder" else None


def _one_node_layout(df: pd.DataFrame) -> pd.Series:
    """tp x attention_dp = moe_tp x moe_ep GPUs, at most one node (dense rows: always)."""
    dp = df["attention_dp_size"].fillna(1)
    gpus = df["tp_size"] * dp
    moe = df["moe_ep_size"].notna() & df["moe_tp_size"].notna()
    ok = (gpus == df["moe_tp_size"] * df["moe_ep_size"]) & (gpus <= NODE_GPUS)
    return ~moe | ok


def _concurrency(df: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    src = df["silicon_data_source"].str.extract(r"silicon_concurrency=(\d+)")[0]
    from_id = df["id"].str.extract(r"_c(\d+)_")[0]
    conc = src.fillna(from_id).astype(float).fillna(df["batch_size"])
    how = np.where(src.notna(), "silicon_data_source",
                   np.where(from_id.notna(), "id", "batch_size"))
    return conc.astype(int), pd.Series(how, index=df.index)


def _catalog_rows(shared: Path, mode: str) -> pd.DataFrame:
    """The `mode` ('agg' or 'disagg') rows of catalog models on catalog GPUs, with their
    catalog model label and `arch` (dense or moe)."""
    raw = pd.read_csv(shared / SOURCE)
    df = raw[(raw["mode"] == mode) & raw["system"].isin(DEVICES)].copy()
    df["model"] = df["model_path"].map(_catalog_model)
    df = df[df["model"].notna()].copy()
    df["arch"] = np.where(df["model"].map(lambda m: get_model(m).moe is None), "dense", "moe")
    return df


def derive(shared: Path) -> pd.DataFrame:
    df = _catalog_rows(shared, "agg")
    df = df[(df["arch"] == "dense") | _one_node_layout(df)].copy()
    assert set(DEVICES.values()) <= set(device_names())
    prec = df["precision"].map(PRECISIONS)
    assert prec[df["precision"].notna()].notna().all(), "unmapped precision"
    conc, how = _concurrency(df)
    out = pd.DataFrame({
        "point_id": df["id"], "backend": df["backend"],
        "backend_version": df["backend_version"].fillna(""),
        "model": df["model"], "model_path": df["model_path"],
        "device": df["system"].map(DEVICES), "system": df["system"],
        "precision": prec.fillna("bf16"),
        "precision_source": np.where(prec.notna(), "csv", "assumed-bf16"),
        "gemm_quant_mode": df["gemm_quant_mode"].fillna(""),
        "isl": df["isl"].astype(int), "osl": df["osl"].astype(int),
        "concurrency": conc, "concurrency_source": how,
        "batch_size": df["batch_size"].astype(int),
        "tp": df["tp_size"].astype(int), "pp": df["pp_size"].astype(int),
        "dp": df["attention_dp_size"].fillna(1).astype(int),
        "arch": df["arch"],
        "ep": np.where(df["arch"] == "moe", df["moe_ep_size"].fillna(1), 1).astype(int),
        "moe_tp": np.where(df["arch"] == "moe", df["moe_tp_size"].fillna(df["tp_size"]),
                           df["tp_size"]).astype(int),
        "moe_quant_mode": df["moe_quant_mode"].fillna(""),
        "ttft_s": df["silicon_ttft_ms"] / 1e3, "tpot_s": df["silicon_tpot_ms"] / 1e3,
        "silicon_data_source": df["silicon_data_source"], "source_file": SOURCE,
    })
    out = out.drop_duplicates(subset=[c for c in out.columns if c != "point_id"])
    assert out["ttft_s"].gt(0).all() and out["tpot_s"].gt(0).all()
    return out.sort_values(["model", "device", "backend", "precision", "tp", "isl", "osl",
                            "concurrency"], kind="stable").reset_index(drop=True)


def _pool_columns(df: pd.DataFrame, pool: str) -> tuple[dict, pd.Series]:
    """One pool's per-worker layout columns, and which rows perfcast can express."""
    tp = df[f"{pool}_tp_size"].astype(int)
    dp = df[f"{pool}_attention_dp_size"].fillna(1).astype(int)
    moe_tp = df[f"{pool}_moe_tp_size"].fillna(0).astype(int)
    ep = df[f"{pool}_moe_ep_size"].fillna(0).astype(int)
    moe = df["arch"] == "moe"
    ok = ~moe | ((ep <= 1) & (dp == 1)) | ((ep > 1) & (tp * dp == moe_tp * ep))
    ok &= tp * dp <= POOL_MAX_GPUS
    cols = {f"{pool}_workers": df[f"{pool}_num_workers"].astype(int), f"{pool}_tp": tp,
            f"{pool}_dp": np.where(moe, dp, 1), f"{pool}_ep": np.where(moe, ep.clip(1), 1),
            f"{pool}_moe_tp": np.where(moe, moe_tp.where(moe_tp > 0, tp), tp),
            f"{pool}_batch": df[f"{pool}_batch_size"].astype(int)}
    return cols, ok


def derive_disagg(shared: Path) -> pd.DataFrame:
    df = _catalog_rows(shared, "disagg")
    counted = df[[f"{p}_{c}" for p in ("prefill", "decode")
                  for c in ("num_workers", "batch_size")]].notna().all(axis=1)
    df = df[counted].copy()
    pre, pre_ok = _pool_columns(df, "prefill")
    dec, dec_ok = _pool_columns(df, "decode")
    conc = df["id"].str.extract(r"_c(\d+)_")[0].astype(float)
    keep = pre_ok & dec_ok & conc.notna() & df["precision"].isin(PRECISIONS)
    out = pd.DataFrame({
        "point_id": df["id"], "backend": df["backend"], "model": df["model"],
        "model_path": df["model_path"], "device": df["system"].map(DEVICES),
        "precision": df["precision"].map(PRECISIONS), "arch": df["arch"],
        "gemm_quant_mode": df["gemm_quant_mode"].fillna(""),
        "moe_quant_mode": df["moe_quant_mode"].fillna(""),
        "isl": df["isl"].astype(int), "osl": df["osl"].astype(int), "concurrency": conc,
        **pre, **dec, "ttft_s": df["silicon_ttft_ms"] / 1e3,
        "tpot_s": df["silicon_tpot_ms"] / 1e3,
        "silicon_data_source": df["silicon_data_source"], "source_file": SOURCE})[keep]
    out["concurrency"] = out["concurrency"].astype(int)
    out = out.drop_duplicates(subset=[c for c in out.columns if c != "point_id"])
    assert out["ttft_s"].gt(0).all() and out["tpot_s"].gt(0).all()
    return out.sort_values(["model", "device", "backend", "precision", "isl", "osl",
                            "concurrency"], kind="stable").reset_index(drop=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    args = ap.parse_args()
    points = derive(Path(args.shared))
    points.to_csv(OUT, index=False, float_format="%.9g")
    print(f"wrote {OUT.relative_to(REPO)}: {len(points)} points, {OUT.stat().st_size} bytes")
    disagg = derive_disagg(Path(args.shared))
    disagg.to_csv(OUT_DISAGG, index=False, float_format="%.9g")
    print(f"wrote {OUT_DISAGG.relative_to(REPO)}: {len(disagg)} points")
    print(disagg.groupby(["model", "device", "backend", "precision"]).size().to_string())
    print(points.groupby(["arch", "model", "device", "backend", "precision"]).agg(
        n=("point_id", "size"), concurrency=("concurrency", lambda c: sorted(set(c))),
        layouts=("tp", lambda t: sorted(set(zip(t, points.loc[t.index, "dp"],
                                                 points.loc[t.index, "ep"], strict=True))))
    ).to_string())


if __name__ == "__main__":
    main()
