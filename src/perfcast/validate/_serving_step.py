"""Composed transformer layers against measured step-level op data (Vidur, AIConfigurator).

A serving step is a stack of identical layers, so a layer is the unit its time composes from.
Here one layer's kernels are priced by perfcast (`step_ops` + a time model, summed per
instance) and compared with the sum of the same layer's kernels as measured:

- **Vidur** (`vidur-profiling/profiling/compute/<gpu>/<model>/mlp.csv`, fp16, one TP shard):
  the token-linear ops of a Llama layer (norms, QKV / output / MLP GEMMs, RoPE, activation,
  two residual adds) at each measured token count. Vidur's attention profiles were not copied
  (see its README), so this checks the token-linear part of a layer.
- **AIConfigurator** (`aiconfigurator/systems/data/<system>/`, bf16, CUDA graphs): context or
  generation attention plus the layer's four GEMMs at the same tokens. AIC's GEMM grid has
  no Llama FFN widths, so the shapes are Llama-3-8B/70B attention with an 8192-wide FFN.

The calibration was fitted on these kernel rows (the shipped measurement store holds them),
so for target-measured devices this checks composition, not generalisation.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.kernels import ExecutionTimeModel, PhysicsModel, RooflineModel, shipped_calibration
from perfcast.ops import Batch, step_ops
from perfcast.specs import DType, ParallelPlan, Precision, get_device, get_model

__all__ = ["default_data_dir", "validate_serving_steps"]

VIDUR_MODELS = {"meta-llama/Llama-2-7b-hf": "llama-2-7b", "meta-llama/Llama-2-70b-hf":
                "llama-2-70b", "meta-llama/Meta-Llama-3-8B": "llama-3-8b",
                "meta-llama/Meta-Llama-3-70B": "llama-3-70b"}
VIDUR_DEVICES = {"a100": "a100-sxm4-80gb", "a40": "a40", "h100": "h100-sxm"}
# Vidur op -> perfcast op(s) of the same layer (`add` runs twice: after attention and MLP)
VIDUR_OPS = {"input_layernorm": ("input_norm",), "attn_pre_proj": ("qkv_proj",),
             "attn_rope": ("rope",), "attn_post_proj": ("o_proj",),
             "post_attention_layernorm": ("post_attn_norm",), "mlp_up_proj": ("mlp_up_proj",),
             "mlp_act": ("mlp_act",), "mlp_down_proj": ("mlp_down_proj",),
             "add": ("attn_residual", "mlp_residual")}
AIC_DEVICES = {"a100_sxm": "a100-sxm4-80gb", "h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm",
               "b200_sxm": "b200-sxm", "b300_sxm": "b300-sxm", "gb200": "gb200",
               "gb300": "gb300", "l40s": "l40s", "rtx_pro_6000_server": "rtx-pro-6000"}
AIC_SHAPES = {"llama-3-8b/ffn8192": "llama-3-8b", "llama-3-70b/ffn8192": "llama-3-70b"}
AIC_OPS = ("qkv_proj", "o_proj", "mlp_up_proj", "mlp_down_proj", "attn")
DECODE_MAX_TOKENS = 256  # Vidur points up to this many tokens are decode-sized batches


def default_data_dir() -> Path:
    """$PERFCAST_DATA_DIR, else ../shared/data beside the repository."""
    env = os.environ.get("PERFCAST_DATA_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[4] / "shared" / "data"


def _layer_seconds(model, batches, plan, precision, ops, device, time_model) -> np.ndarray:
    """Seconds of one layer's kernels named in `ops` (each op's rows summed) per batch."""
    tables = []
    for i, batch in enumerate(batches):
        t = step_ops(model, batch, precision, plan)
        tables.append(t[(t["layer"] == "layer") & t["op"].isin(ops)].assign(point=i))
    rows = pd.concat(tables, ignore_index=True)
    times = time_model.kernel_times(rows.drop(columns="point"), device)
    return pd.Series(times).groupby(rows["point"].to_numpy()).sum().to_numpy()


def _vidur_points(root: Path, per_file: int) -> list[tuple]:
    out = []
    for gpu, device in VIDUR_DEVICES.items():
        for hf, name in VIDUR_MODELS.items():
            path = root / "vidur-profiling/profiling/compute" / gpu / hf / "mlp.csv"
            if not path.exists():
                continue
            df = pd.read_csv(path)
            cols = [f"time_stats.{op}.median" for op in VIDUR_OPS]
            df = df.dropna(subset=cols)
            weights = np.array([len(v) for v in VIDUR_OPS.values()], dtype=float)
            df = df.assign(measured_s=df[cols].to_numpy() @ weights / 1e3)
            df = df.sort_values(["num_tensor_parallel_workers", "num_tokens"])
            small = df["num_tokens"] <= DECODE_MAX_TOKENS
            out.append((device, name, pd.concat([  # per_file points of each split
                part.iloc[::max(len(part) // per_file, 1)] for part in (df[small], df[~small])])))
    return out


def _vidur_rows(root: Path, per_file: int, methods) -> list[dict]:
    rows = []
    ops = [o for v in VIDUR_OPS.values() for o in v]
    prec = Precision(weights=DType.FP16, activations=DType.FP16, kv_cache=DType.FP16)
    for device_name, name, df in _vidur_points(root, per_file):
        device, model = get_device(device_name), get_model(name)
        for tp, part in df.groupby("num_tensor_parallel_workers"):
            tokens = part["num_tokens"].to_numpy(dtype=int)
            batches = [Batch(prefill_tokens=(int(t),)) for t in tokens]
            for method, tm in methods(device_name):
                pred = _layer_seconds(model, batches, ParallelPlan(tp=int(tp)), prec, ops,
                                      device, tm)
                for t, p, m in zip(tokens, pred, part["measured_s"], strict=True):
                    split = "vidur:decode" if t <= DECODE_MAX_TOKENS else "vidur:prefill"
                    rows.append({"split": split, "device": device_name, "group": name,
                                 "method": method, "ape": abs(p / m - 1)})
    return rows


def _aic_table(root: Path, system: str, kind: str) -> pd.DataFrame | None:
    files = sorted((root / "aiconfigurator/systems/data" / system / kind).glob(
        "trtllm/*/*.parquet"))
    return {f.stem: pd.read_parquet(f) for f in files} if files else None


def _aic_rows(root: Path, per_split: int, methods) -> list[dict]:
    rows = []
    for system, device_name in AIC_DEVICES.items():
        attn, gemm = _aic_table(root, system, "attention"), _aic_table(root, system, "gemm")
        if not attn or not gemm:
            continue
        g = gemm["gemm_perf"]
        g = g[g["gemm_dtype"] == "bfloat16"].groupby(["m", "n", "k"])["latency"].median()
        device = get_device(device_name)
        for group, base in AIC_SHAPES.items():
            model = get_model(base).model_copy(update={"intermediate_size": 8192})
            h, hd = model.hidden_size, model.head_dim
            shapes = [((model.num_heads + 2 * model.num_kv_heads) * hd, h), (h, h),
                      (2 * 8192, h), (h, 8192)]
            for split, table in (("aic:context", "context_attention_perf"),
                                 ("aic:generation", "generation_attention_perf")):
                a = attn[table]
                a = a[(a["num_heads"] == model.num_heads) & (a["head_dim"] == hd)
                      & (a["num_key_value_heads"] == model.num_kv_heads)
                      & (a["attn_dtype"] == "bfloat16") & (a["kv_cache_dtype"] == "bfloat16")
                      & (a["window_size"] == 0)]
                a = a.groupby(["batch_size", "isl", "step"])["latency"].median().reset_index()
                ctx = split == "aic:context"
                m = a["batch_size"] * (a["isl"] if ctx else 1)
                keys = [list(zip(m, [n] * len(m), [k] * len(m), strict=True))
                        for n, k in shapes]
                gemm_ms = sum(g.reindex(k).to_numpy() for k in keys)
                a = a.assign(measured_s=(a["latency"] + gemm_ms) / 1e3).dropna()
                a = a.iloc[::max(len(a) // per_split, 1)]
                batches = [Batch.prefill(int(b), int(i)) if ctx else Batch.decode(int(b),
                           int(s) + 1) for b, i, s in zip(a["batch_size"], a["isl"], a["step"],
                                                          strict=True)]
                for method, tm in methods(device_name):
                    pred = _layer_seconds(model, batches, ParallelPlan(), Precision(), AIC_OPS,
                                          device, tm)
                    rows += [{"split": split, "device": device_name, "group": group,
                              "method": method, "ape": abs(p / mm - 1)}
                             for p, mm in zip(pred, a["measured_s"], strict=True)]
    return rows


def _methods(device_name: str) -> list[tuple[str, ExecutionTimeModel]]:
    cal = shipped_calibration()
    return [("roofline", RooflineModel()),
            (f"perfcast:{cal.tier_for(device_name)}", PhysicsModel(cal))]


def validate_serving_steps(data_dir: str | Path | None = None,
                           sources: tuple[str, ...] = ("vidur", "aiconfigurator"),
                           points_per_group: int = 64) -> pd.DataFrame:
    """MAPE and P90 APE of composed layer times per split x device x group x method
    (the `validate_kernels` row form: split, device, group, method, mape, p90_ape, n)."""
    root = Path(data_dir) if data_dir else default_data_dir()
    if not root.is_dir():
        raise InputError("data_dir", f"{root} is not a directory",
                         "the shared data folder (vidur-profiling/, aiconfigurator/)")
    unknown = set(sources) - {"vidur", "aiconfigurator"}
    if unknown:
        raise InputError("sources", f"unknown {sorted(unknown)}", "vidur, aiconfigurator")
    rows = []
    if "vidur" in sources:
        rows += _vidur_rows(root, points_per_group, _methods)
    if "aiconfigurator" in sources:
        rows += _aic_rows(root, points_per_group, _methods)
    df = pd.DataFrame(rows, columns=["split", "device", "group", "method", "ape"])
    out = df.groupby(["split", "device", "group", "method"], sort=True)["ape"].agg(
        mape="mean", p90_ape=lambda x: float(np.quantile(x, 0.9)), n="size")
    return out.reset_index()
