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

from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.kernels import ExecutionTimeModel, PhysicsModel, RooflineModel, shipped_calibration
from perfcast.ops import Batch, step_ops
from perfcast.specs import DType, ParallelPlan, Precision, get_device, get_model

__all__ = ["layer_points_from_shared", "load_layer_points", "validate_serving_steps"]

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
AIC_FFN = 8192  # AIC's GEMM grid has 8192-wide FFN shapes, not Llama's own
DECODE_MAX_TOKENS = 256  # Vidur points up to this many tokens are decode-sized batches


def _layer_seconds(model, batches, plan, precision, ops, device, time_model) -> np.ndarray:
    """Seconds of one layer's kernels named in `ops` (each op's rows summed) per batch."""
    tables = []
    for i, batch in enumerate(batches):
        t = step_ops(model, batch, precision, plan)
        tables.append(t[(t["layer"] == "layer") & t["op"].isin(ops)].assign(point=i))
    rows = pd.concat(tables, ignore_index=True)
    times = time_model.kernel_times(rows.drop(columns="point"), device)
    return pd.Series(times).groupby(rows["point"].to_numpy()).sum().to_numpy()


def _vidur_points(root: Path, per_file: int) -> list[dict]:
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
            for part in (df[small], df[~small]):  # per_file points of each split
                for r in part.iloc[::max(len(part) // per_file, 1)].itertuples():
                    t = int(r.num_tokens)
                    out.append({"split": "vidur:decode" if t <= DECODE_MAX_TOKENS
                                else "vidur:prefill", "device": device, "group": name,
                                "model": name, "ffn": 0,
                                "tp": int(r.num_tensor_parallel_workers), "kind": "tokens",
                                "batch": 1, "tokens": t, "measured_s": float(r.measured_s),
                                "source_file": str(path.relative_to(root))})
    return out


def _aic_table(root: Path, system: str, kind: str) -> dict | None:
    files = sorted((root / "aiconfigurator/systems/data" / system / kind).glob(
        "trtllm/*/*.parquet"))
    return {f.stem: pd.read_parquet(f) for f in files} if files else None


def _aic_points(root: Path, per_split: int) -> list[dict]:
    out = []
    for system, device_name in AIC_DEVICES.items():
        attn, gemm = _aic_table(root, system, "attention"), _aic_table(root, system, "gemm")
        if not attn or not gemm:
            continue
        g = gemm["gemm_perf"]
        g = g[g["gemm_dtype"] == "bfloat16"].groupby(["m", "n", "k"])["latency"].median()
        for group, base in AIC_SHAPES.items():
            model = get_model(base)
            h, hd = model.hidden_size, model.head_dim
            shapes = [((model.num_heads + 2 * model.num_kv_heads) * hd, h), (h, h),
                      (2 * AIC_FFN, h), (h, AIC_FFN)]
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
                for r in a.itertuples():
                    out.append({"split": split, "device": device_name, "group": group,
                                "model": base, "ffn": AIC_FFN, "tp": 1,
                                "kind": "prefill" if ctx else "decode",
                                "batch": int(r.batch_size),
                                "tokens": int(r.isl) if ctx else int(r.step) + 1,
                                "measured_s": float(r.measured_s),
                                "source_file": f"aiconfigurator/systems/data/{system}"})
    return out


def layer_points_from_shared(data_dir: str | Path, points_per_group: int = 64
                             ) -> pd.DataFrame:
    """Measured layer times (seconds) with the batch that produced them, from the raw Vidur
    and AIConfigurator folders: what scripts/build_serving_step_points.py ships."""
    root = Path(data_dir)
    if not root.is_dir():
        raise InputError("data_dir", f"{root} is not a directory",
                         "the shared data folder (vidur-profiling/, aiconfigurator/)")
    return pd.DataFrame(_vidur_points(root, points_per_group)
                        + _aic_points(root, points_per_group))


def load_layer_points() -> pd.DataFrame:
    """The shipped measured layer points (validate/data/serving_step_points.csv)."""
    with (resources.files("perfcast.validate") / "data" / "serving_step_points.csv"
          ).open("rb") as f:
        return pd.read_csv(f)


def _batches(part: pd.DataFrame) -> list[Batch]:
    out = []
    for kind, b, t in zip(part["kind"], part["batch"], part["tokens"], strict=True):
        if kind == "tokens":
            out.append(Batch(prefill_tokens=(int(t),)))
        elif kind == "prefill":
            out.append(Batch.prefill(int(b), int(t)))
        else:
            out.append(Batch.decode(int(b), int(t)))
    return out


def _methods(device_name: str) -> list[tuple[str, ExecutionTimeModel]]:
    cal = shipped_calibration()
    return [("roofline", RooflineModel()),
            (f"perfcast:{cal.tier_for(device_name)}", PhysicsModel(cal))]


def _vidur_precision() -> Precision:
    return Precision(weights=DType.FP16, activations=DType.FP16, kv_cache=DType.FP16)


def validate_serving_steps(points: pd.DataFrame | None = None,
                           points_per_group: int | None = None) -> pd.DataFrame:
    """MAPE and P90 APE of composed layer times per split x device x group x method
    (the `validate_kernels` row form: split, device, group, method, mape, p90_ape, n).
    `points` default: the shipped measured layer points; `points_per_group` thins them."""
    points = load_layer_points() if points is None else points
    rows = []
    for (split, device_name, group, model_name, ffn, tp), part in points.groupby(
            ["split", "device", "group", "model", "ffn", "tp"], sort=True):
        if points_per_group:
            part = part.iloc[::max(len(part) // points_per_group, 1)]
        model = get_model(model_name)
        if ffn:
            model = model.model_copy(update={"intermediate_size": int(ffn)})
        vidur = split.startswith("vidur")
        ops = [o for v in VIDUR_OPS.values() for o in v] if vidur else AIC_OPS
        prec = _vidur_precision() if vidur else Precision()
        device = get_device(device_name)
        for method, tm in _methods(device_name):
            pred = _layer_seconds(model, _batches(part), ParallelPlan(tp=int(tp)), prec, ops,
                                  device, tm)
            ape = np.abs(pred / part["measured_s"].to_numpy(dtype=float) - 1)
            rows += [{"split": split, "device": device_name, "group": group,
                      "method": method, "ape": a} for a in ape]
    df = pd.DataFrame(rows, columns=["split", "device", "group", "method", "ape"])
    out = df.groupby(["split", "device", "group", "method"], sort=True)["ape"].agg(
        mape="mean", p90_ape=lambda x: float(np.quantile(x, 0.9)), n="size")
    return out.reset_index()
