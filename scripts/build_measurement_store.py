"""Build src/perfcast/measure/data/kernels.parquet: every real kernel measurement in one table.

Run from the repository root: `python scripts/build_measurement_store.py [SHARED_DATA_DIR]`
(default `../shared/data`; needs pyarrow). Reads AIConfigurator, NeuSight, Vidur and LLMCompass,
normalises each row to `perfcast.measure._schema.STORE_COLUMNS` (catalog device names, perfcast
op families and shape conventions, FLOPs and bytes as `perfcast.ops` counts them, seconds),
subsamples the biggest AIConfigurator groups, drops exact duplicates (median latency) and writes
a deterministic zstd Parquet file plus its README.md (provenance, rules, row counts).

`--framework vllm` / `--framework sglang` instead writes kernels_vllm.parquet /
kernels_sglang.parquet: the AIConfigurator tables collected with that framework's own kernels
(same converters, op = the table's `kernel_source`), and its section of the same README.md.
"""

from __future__ import annotations

import argparse
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from perfcast.measure._schema import STORE_COLUMNS, check_measurements
from perfcast.ops import attended_keys
from perfcast.specs import get_device

OUT = Path("src/perfcast/measure/data")
CAP = 6000  # max rows per AIConfigurator (device, family, op, dtype, weight_dtype, kv_dtype) group
# Per-framework stores (vLLM, SGLang): op is the kernel source, so groups are per kernel and
# many; a smaller cap keeps each file small (< 6 MB) and the per-stack fits quick.
FRAMEWORK_CAP = 1000
FRAMEWORKS = {  # --framework -> (AIC framework folder, store file, `source` column)
    "default": ("trtllm", "kernels.parquet", "aiconfigurator"),
    "vllm": ("vllm", "kernels_vllm.parquet", "aiconfigurator-vllm"),
    "sglang": ("sglang", "kernels_sglang.parquet", "aiconfigurator-sglang"),
}
# Framework folders beside trtllm that the default store leaves out (they have their own).
PER_FRAMEWORK = frozenset(f for f, _, _ in FRAMEWORKS.values()) - {"trtllm"}
ELEM = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5, "int4": 0.5}
SHAPE = ["b", "m", "n", "k", "batch", "heads", "kv_heads", "head_dim", "q_len", "kv_len",
         "window"]
STRINGS = [c for c, t in STORE_COLUMNS.items() if t == "string"]
# Vidur's profiler (CudaTimer with kineto / record_function) sums the GPU time of the op's
# kernels: no launch latency (the smallest adds are ~1 us), hence the "kineto" timing method.
VIDUR_TIMING = "kineto"

# ---------------------------------------------------------------------------------------------
# AIConfigurator
AIC_SYSTEMS = {  # system dir -> perfcast catalog device (b60 has no catalog entry: skipped)
    "a100_sxm": "a100-sxm4-80gb", "h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm",
    "b200_sxm": "b200-sxm", "b300_sxm": "b300-sxm", "gb200": "gb200", "gb300": "gb300",
    "l40s": "l40s", "rtx_pro_6000_server": "rtx-pro-6000",
}
GEMM_DTYPES = {  # gemm_dtype -> (op, math dtype, weight dtype)
    "bfloat16": ("gemm", "bf16", "bf16"), "fp8": ("gemm", "fp8", "fp8"),
    "fp8_block": ("gemm_fp8_block", "fp8", "fp8"), "nvfp4": ("gemm", "fp4", "fp4"),
    "int8_wo": ("gemm", "bf16", "int8"), "int4_wo": ("gemm", "bf16", "int4"),
    "sq": ("gemm", "int8", "int8"),
}
ATTN_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8"}
MOE_DTYPES = {  # moe_dtype -> (activation/math dtype, weight dtype); mixed names: weights first
    "bfloat16": ("bf16", "bf16"), "fp8": ("fp8", "fp8"), "fp8_block": ("fp8", "fp8"),
    "nvfp4": ("fp4", "fp4"), "w4afp8": ("fp8", "int4"),
    "w4a8_mxfp4_mxfp8": ("fp8", "fp4"),  # MXFP4 weights, MXFP8 activations
    "w4a16_mxfp4": ("bf16", "fp4"),      # MXFP4 weights, BF16 activations (gpt-oss)
    "int4_wo": ("bf16", "int4"),         # INT4 weights, BF16 activations (Marlin; SGLang, vLLM)
}
COMM_FAMILIES = {"all_reduce": "allreduce", "all_gather": "allgather",
                 "reduce_scatter": "reducescatter", "alltoall": "alltoall"}
COMM_DTYPES = {"half": "fp16", "float16": "fp16", "bfloat16": "bf16", "float": "fp32",
               "float32": "fp32", "int8": "int8", "fp8": "fp8"}
MLA = {"qk_nope": 128, "qk_rope": 64, "v": 128, "kv_lora": 512}


def frame(rows: int, /, **cols) -> pd.DataFrame:
    """A STORE_COLUMNS frame of `rows` rows: given columns, "" for other strings, NaN for
    numbers; extra keyword columns (such as `_size`) are appended."""
    out = {}
    for col, kind in STORE_COLUMNS.items():
        value = cols.pop(col, "" if kind == "string" else np.nan)
        out[col] = np.broadcast_to(np.asarray(value, dtype=object if kind == "string" else float),
                                   (rows,)).copy()
    extra = {k: np.broadcast_to(np.asarray(v), (rows,)).copy() for k, v in cols.items()}
    return pd.DataFrame({**out, **extra})


def elem(dtypes: pd.Series) -> np.ndarray:
    return dtypes.map(ELEM).to_numpy(dtype=float)


def _aic_tables(shared: Path, table: str, framework: str = "trtllm"
                ) -> list[tuple[str, str, pd.DataFrame]]:
    """(catalog device, source_file, frame) of one table name over the AIC systems, from the
    folders `<system>/<family>/<framework>/<version>/`: "trtllm" takes every framework folder
    but the per-framework ones (TensorRT-LLM and NCCL), "vllm" / "sglang" only their own."""
    out = []
    for system, device in AIC_SYSTEMS.items():
        for path in sorted((shared / "aiconfigurator/systems/data" / system).glob(
                f"*/*/*/{table}.parquet")):
            folder = path.parent.parent.name
            if (folder in PER_FRAMEWORK) if framework == "trtllm" else folder != framework:
                continue
            df = pd.read_parquet(path)
            if table.endswith("attention_perf") and "window_size" not in df:
                df = df.assign(window_size=0)  # older collectors (vLLM 0.14): no window column
            names = {get_device(s).name for s in df["device"].unique()}
            if names != {device} and framework != "trtllm" and names <= set(AIC_SYSTEMS.values()):
                # upstream's b300_sxm SGLang gemm and attention tables are byte copies of the
                # GB300 ones (device "NVIDIA GB300"): GB300 keeps its own, the copy is skipped
                warnings.warn(f"{path}: rows of {sorted(names)}, not {device}: skipped",
                              stacklevel=1)
                continue
            if names != {device}:
                raise SystemExit(f"{path}: device strings {names} do not resolve to {device}")
            out.append((device, path.relative_to(shared).as_posix(), df))
    return out


def _aic_common(device: str, src: str, df: pd.DataFrame, framework: str = "trtllm") -> dict:
    source = next(s for f, _, s in FRAMEWORKS.values() if f == framework)
    return {"source": source, "source_file": src, "device": device,
            "timing": "cuda_graph", "latency_s": df["latency"].to_numpy(float) / 1e3}


def _kernel_op(df: pd.DataFrame, framework: str, trtllm_op, prefix: str = "") -> np.ndarray:
    """The op column: TensorRT-LLM's op names as before; for a framework store the table's
    `kernel_source` (FA3, FA4, flashinfer, triton, ...), each kernel its own fixed cost."""
    if framework == "trtllm":
        return np.broadcast_to(np.asarray(trtllm_op, dtype=object), (len(df),)).copy()
    return (prefix + df["kernel_source"].astype(str)).to_numpy(dtype=object)


def aic_gemm(shared: Path, framework: str = "trtllm") -> list[pd.DataFrame]:
    frames = []
    for device, src, df in _aic_tables(shared, "gemm_perf", framework):
        unknown = set(df["gemm_dtype"]) - set(GEMM_DTYPES)
        if unknown:
            warnings.warn(f"{src}: unknown gemm_dtype {sorted(unknown)} skipped", stacklevel=1)
            df = df[df["gemm_dtype"].isin(GEMM_DTYPES)]
        spec = df["gemm_dtype"].map(GEMM_DTYPES)
        dtype, wdtype = spec.str[1], spec.str[2]
        m, n, k = (df[c].to_numpy(float) for c in ("m", "n", "k"))
        frames.append(frame(
            len(df), **_aic_common(device, src, df, framework), family="gemm",
            op=_kernel_op(df, framework, spec.str[0].to_numpy()),
            dtype=dtype.to_numpy(), weight_dtype=wdtype.to_numpy(), b=1, m=m, n=n, k=k,
            flops=2 * m * n * k, bytes=m * k * elem(dtype) + n * k * elem(wdtype) + m * n * 2,
            _size=m))
    return frames


def aic_attention(shared: Path, framework: str = "trtllm") -> list[pd.DataFrame]:
    frames = []
    for device, src, df in _aic_tables(shared, "context_attention_perf", framework):
        dt, kv = df["attn_dtype"].map(ATTN_DTYPES), df["kv_cache_dtype"].map(ATTN_DTYPES)
        batch, isl, heads, kvh, hd, win = (df[c].to_numpy(float) for c in (
            "batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "window_size"))
        pairs = np.empty_like(isl)
        for w in np.unique(win):  # attended_keys takes one window at a time
            sel = win == w
            pairs[sel] = attended_keys(isl[sel], np.zeros(sel.sum()), int(w) or None)
        frames.append(frame(
            len(df), **_aic_common(device, src, df, framework), family="attn_prefill",
            op=_kernel_op(df, framework, "attn"),
            dtype=dt.to_numpy(), weight_dtype=dt.to_numpy(), kv_dtype=kv.to_numpy(),
            b=batch * heads, m=isl, n=isl, k=hd, batch=batch, heads=heads, kv_heads=kvh,
            head_dim=hd, q_len=isl, kv_len=isl, window=win,
            flops=4 * batch * heads * hd * pairs,
            bytes=batch * isl * (heads + 2 * kvh) * hd * elem(dt)
            + batch * isl * heads * hd * elem(dt) + batch * isl * 2 * kvh * hd * elem(kv),
            _size=isl))
    for device, src, df in _aic_tables(shared, "generation_attention_perf", framework):
        dt, kv = df["attn_dtype"].map(ATTN_DTYPES), df["kv_cache_dtype"].map(ATTN_DTYPES)
        batch, kvlen, heads, kvh, hd, win = (df[c].to_numpy(float) for c in (
            "batch_size", "step", "num_heads", "num_key_value_heads", "head_dim", "window_size"))
        keys = np.where(win > 0, np.minimum(kvlen, win), kvlen)
        frames.append(frame(
            len(df), **_aic_common(device, src, df, framework), family="attn_decode",
            op=_kernel_op(df, framework, "attn"),
            dtype=dt.to_numpy(), weight_dtype=dt.to_numpy(), kv_dtype=kv.to_numpy(),
            b=batch * heads, m=1, n=keys, k=hd, batch=batch, heads=heads, kv_heads=kvh,
            head_dim=hd, q_len=1, kv_len=kvlen, window=win,
            flops=4 * batch * heads * hd * keys,
            bytes=batch * keys * 2 * kvh * hd * elem(kv) + 2 * batch * heads * hd * 2,
            _size=kvlen * batch))
    return frames


def aic_mla(shared: Path, framework: str = "trtllm") -> list[pd.DataFrame]:
    """DeepSeek MLA core. `num_heads` is already per GPU: upstream's collector divides the
    model's heads by tp_size before logging (latency scales with num_heads at any tp_size).
    Framework stores name the op `mla_<kernel_source>`."""
    d_qk = MLA["qk_nope"] + MLA["qk_rope"]      # 192
    d_lat = MLA["kv_lora"] + MLA["qk_rope"]     # 576
    frames = []
    for device, src, df in _aic_tables(shared, "context_mla_perf", framework):
        dt, kv = df["mla_dtype"].map(ATTN_DTYPES), df["kv_cache_dtype"].map(ATTN_DTYPES)
        batch, isl, heads = (df[c].to_numpy(float) for c in ("batch_size", "isl", "num_heads"))
        pairs = attended_keys(isl, np.zeros_like(isl), None)
        frames.append(frame(
            len(df), **_aic_common(device, src, df, framework), family="attn_prefill",
            op=_kernel_op(df, framework, "mla", "mla_"),
            dtype=dt.to_numpy(), weight_dtype=dt.to_numpy(), kv_dtype=kv.to_numpy(),
            b=batch * heads, m=isl, n=isl, k=d_qk, batch=batch, heads=heads, kv_heads=heads,
            head_dim=d_qk, q_len=isl, kv_len=isl, window=0,
            flops=2 * batch * heads * (d_qk + MLA["v"]) * pairs,
            bytes=batch * isl * heads * (d_qk + d_qk + MLA["v"] + MLA["v"]) * 2, _size=isl))
    for device, src, df in _aic_tables(shared, "generation_mla_perf", framework):
        dt, kv = df["mla_dtype"].map(ATTN_DTYPES), df["kv_cache_dtype"].map(ATTN_DTYPES)
        batch, keys, heads = (df[c].to_numpy(float) for c in ("batch_size", "step", "num_heads"))
        frames.append(frame(
            len(df), **_aic_common(device, src, df, framework), family="attn_decode",
            op=_kernel_op(df, framework, "mla", "mla_"),
            dtype=dt.to_numpy(), weight_dtype=dt.to_numpy(), kv_dtype=kv.to_numpy(),
            b=batch * heads, m=1, n=keys, k=d_lat, batch=batch, heads=heads, kv_heads=1,
            head_dim=d_lat, q_len=1, kv_len=keys, window=0,
            flops=2 * batch * heads * (d_lat + MLA["kv_lora"]) * keys,
            bytes=batch * keys * d_lat * elem(kv) + batch * heads * (d_lat + MLA["kv_lora"]) * 2,
            _size=keys * batch))
    return frames


def moe_dtypes(name: str) -> tuple[str, str]:
    """(activation dtype, weight dtype) of an AIC moe_dtype; unknown names warn and keep bf16."""
    if name in MOE_DTYPES:
        return MOE_DTYPES[name]
    warnings.warn(f"unknown moe_dtype {name!r}: kept as bf16 activations and weights",
                  stacklevel=1)
    return "bf16", "bf16"


def aic_moe(shared: Path, framework: str = "trtllm") -> list[pd.DataFrame]:
    """Fused MoE expert GEMMs (gated: up+gate and down, 3 matrices; `nongated`: 2)."""
    frames = []
    for device, src, df in _aic_tables(shared, "moe_perf", framework):
        spec = {name: moe_dtypes(name) for name in sorted(df["moe_dtype"].unique())}
        dt = df["moe_dtype"].map({name: pair[0] for name, pair in spec.items()})
        wdt = df["moe_dtype"].map({name: pair[1] for name, pair in spec.items()})
        ks = df["kernel_source"].where(
            (df["moe_dtype"] != "fp8_block") | df["kernel_source"].str.contains("fp8_block"),
            df["kernel_source"] + "_fp8_block")
        mats = np.where(df["kernel_source"].str.contains("nongated"), 2.0, 3.0)
        t, h, inter, topk, e, tp, ep = (df[c].to_numpy(float) for c in (
            "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
            "moe_ep_size"))
        inter_local = inter / tp
        routed = t * topk / ep
        active = np.maximum(e / ep * (1 - (1 - topk / e) ** t), 1.0)
        base = ks + ":" + df["distribution"]
        # The routing config goes into op too: configs with equal derived shapes (e.g. active
        # clamped to 1) are different kernels, measured up to 10x apart; keep them apart.
        config = (":E" + df["num_experts"].astype(str) + ":top" + df["topk"].astype(str)
                  + ":tp" + df["moe_tp_size"].astype(str) + ":ep" + df["moe_ep_size"].astype(str))
        frames.append(frame(
            len(df), **_aic_common(device, src, df, framework), family="moe",
            op=(base + config).to_numpy(), _group_op=base.to_numpy(), dtype=dt.to_numpy(),
            weight_dtype=wdt.to_numpy(), b=active, m=routed / active,
            n=(mats - 1) * inter_local, k=h, batch=t,
            flops=2 * routed * mats * h * inter_local,
            bytes=active * mats * h * inter_local * elem(wdt) + t * h * 2 * 2, _size=t))
    return frames


def aic_comm(shared: Path) -> list[pd.DataFrame]:
    frames = []
    for table, dcol in (("nccl_perf", "nccl_dtype"), ("custom_allreduce_perf", "allreduce_dtype")):
        for device, src, df in _aic_tables(shared, table):
            dt = df[dcol].map(COMM_DTYPES)
            if dt.isna().any():
                raise SystemExit(f"{src}: unknown dtype {sorted(set(df[dcol][dt.isna()]))}")
            msg = df["message_size"].to_numpy(float) * elem(dt)
            custom = table == "custom_allreduce_perf"
            frames.append(frame(
                len(df), **_aic_common(device, src, df),
                family="allreduce" if custom else df["op_name"].map(COMM_FAMILIES).to_numpy(),
                op="trtllm_custom" if custom else "nccl", dtype=dt.to_numpy(),
                weight_dtype=dt.to_numpy(), b=1, m=msg, n=df["num_gpus"].to_numpy(float), k=0,
                flops=0, bytes=msg, _size=msg))
    return frames


# ---------------------------------------------------------------------------------------------
# NeuSight
NEUSIGHT_DEVICES = {
    "Tesla V100-PCIE-32GB": "v100-pcie-32gb", "NVIDIA A100-PCIE-40GB": "a100-pcie-40gb",
    "NVIDIA A100 80GB PCIe": "a100-pcie-80gb", "NVIDIA H100 80GB HBM3": "h100-sxm",
    "NVIDIA L4": "l4", "Tesla T4": "t4", "Tesla P4": "p4", "Tesla P100-PCIE-16GB": "p100-pcie-16gb",
    "AMD Instinct MI100": "mi100", "AMD Instinct MI210": "mi210",
}
# vector op -> (family, tensors read + written, FLOPs per element)
NEUSIGHT_VECTOR = {
    "add": ("elementwise", 3, 1), "mul": ("elementwise", 3, 1), "pow": ("elementwise", 3, 4),
    "div": ("elementwise", 3, 4), "addu": ("elementwise", 2, 1), "mulu": ("elementwise", 2, 1),
    "powu": ("elementwise", 2, 4), "divu": ("elementwise", 2, 4), "relu": ("activation", 2, 1),
    "gelu": ("activation", 2, 8), "tanh": ("activation", 2, 8), "softmax": ("softmax", 2, 5),
    "ln": ("norm", 2, 5),
}


def neusight(shared: Path) -> list[pd.DataFrame]:
    df = pd.read_csv(shared / "neusight/kernels_tidy.csv.gz")
    unknown = set(df["device"]) - set(NEUSIGHT_DEVICES)
    if unknown:
        raise SystemExit(f"neusight: unmapped devices {sorted(unknown)}")
    for raw, name in NEUSIGHT_DEVICES.items():
        if get_device(raw).name != name:
            raise SystemExit(f"neusight: {raw!r} resolves to {get_device(raw).name}, not {name}")
    common = lambda d: {  # noqa: E731
        "source": "neusight", "source_file": ("neusight/" + d["source_file"]).to_numpy(),
        "split": d["split"].to_numpy(), "device": d["device"].map(NEUSIGHT_DEVICES).to_numpy(),
        "op": d["op"].to_numpy(), "dtype": "fp32", "weight_dtype": "fp32", "timing": "eager",
        "latency_s": d["latency_ms"].to_numpy(float) / 1e3}
    frames = []
    d = df[df["op"] == "bmm"]
    B, M, N, K = (d[c].to_numpy(float) for c in "BMNK")
    frames.append(frame(len(d), **common(d), family="gemm", b=B, m=M, n=K, k=N,
                        flops=2 * B * M * N * K, bytes=4 * B * (M * N + N * K + M * K)))
    d = df[df["op"] == "linear"]
    B, M, N, K = (d[c].to_numpy(float) for c in "BMNK")
    frames.append(frame(len(d), **common(d), family="gemm", b=1, m=B * M, n=K, k=N,
                        flops=2 * B * M * N * K, bytes=4 * (B * M * N + N * K + B * M * K)))
    d = df[df["op"] == "conv"]
    B, cin, cout, ker, size, stride, pad = (d[c].to_numpy(float) for c in (
        "B", "conv_in_ch", "conv_out_ch", "conv_kernel", "conv_in_size", "conv_stride",
        "conv_padding"))
    out = np.floor((size + 2 * pad - ker) / stride) + 1
    m, n, k = B * out * out, cout, cin * ker * ker
    frames.append(frame(len(d), **common(d), family="conv", b=1, m=m, n=n, k=k,
                        flops=2 * m * n * k,
                        bytes=4 * (B * cin * size**2 + cout * cin * ker**2 + B * cout * out**2)))
    d = df[df["op"].isin(NEUSIGHT_VECTOR)]
    spec = d["op"].map(NEUSIGHT_VECTOR)
    B, H = d["B"].to_numpy(float), d["H"].to_numpy(float)
    tensors, per_elem = spec.str[1].to_numpy(float), spec.str[2].to_numpy(float)
    frames.append(frame(len(d), **common(d), family=spec.str[0].to_numpy(), b=1, m=B, n=H, k=0,
                        flops=per_elem * B * H,
                        bytes=4 * tensors * B * H + np.where(d["op"] == "ln", 2 * 4 * H, 0)))
    left = set(df["op"]) - {"bmm", "linear", "conv"} - set(NEUSIGHT_VECTOR)
    if left:
        raise SystemExit(f"neusight: unhandled ops {sorted(left)}")
    # fp16mm.csv: 9 measured FP16 bmm points (ms) that NeuSight predicted. The file names no GPU;
    # 512 x 1024^3 runs at 366 TFLOP/s, above any pre-Hopper FP16 peak, and NeuSight's only Hopper
    # part is its H100 80GB HBM3 (SXM) -> h100-sxm. Same bmm convention (N = reduction dim).
    path = shared / "neusight/scripts/asplos/fp16mm.csv"
    d = pd.read_csv(path)
    B, M, N, K = (d[c].to_numpy(float) for c in "BMNK")
    frames.append(frame(
        len(d), source="neusight", source_file=path.relative_to(shared).as_posix(), split="test",
        device="h100-sxm", family="gemm", op="bmm", dtype="fp16", weight_dtype="fp16",
        timing="eager", latency_s=d["Latency"].to_numpy(float) / 1e3, b=B, m=M, n=K, k=N,
        flops=2 * B * M * N * K, bytes=2 * B * (M * N + N * K + M * K)))
    return frames


# ---------------------------------------------------------------------------------------------
# Vidur
VIDUR_DEVICES = {"a100": "a100-sxm4-80gb", "h100": "h100-sxm", "a40": "a40"}


def vidur(shared: Path) -> list[pd.DataFrame]:
    root = shared / "vidur-profiling"
    frames = []
    for path in sorted(root.glob("profiling/compute/*/*/*/mlp.csv")):
        df = pd.read_csv(path)
        device = VIDUR_DEVICES[path.relative_to(root).parts[2]]
        tp, t, h, heads, kv, ffn = (df[c].to_numpy(float) for c in (
            "num_tensor_parallel_workers", "num_tokens", "n_embd", "n_head", "n_kv_head",
            "n_expanded_embd"))
        gated = df["use_gated_mlp"].astype(bool).to_numpy()
        hd, heads_l, kv_l, ffn_l = h / heads, heads / tp, np.maximum(kv / tp, 1), ffn / tp
        gemms = {"attn_pre_proj": ((heads_l + 2 * kv_l) * hd, h),
                 "attn_post_proj": (h, heads_l * hd),
                 "mlp_up_proj": (np.where(gated, 2, 1) * ffn_l, h), "mlp_down_proj": (h, ffn_l)}
        # vector op -> (family, width, bytes, FLOPs per element as perfcast.ops counts them)
        vectors = {"input_layernorm": ("norm", h, 2 * 2 * t * h, 4),
                   "post_attention_layernorm": ("norm", h, 2 * 2 * t * h, 4),
                   "mlp_act": ("activation", ffn_l, 2 * t * ffn_l * np.where(gated, 3, 2), 8),
                   "attn_rope": ("rope", (heads_l + kv_l) * hd,
                                 2 * 2 * t * (heads_l + kv_l) * hd, 3),
                   "add": ("elementwise", h, 3 * 2 * t * h, 1),
                   "emb": ("embedding", h, 2 * 2 * t * h, 0)}
        for op in (*gemms, *vectors):
            col = f"time_stats.{op}.median"
            if col not in df:
                continue
            keep = df[col].notna().to_numpy()
            common = {"source": "vidur", "source_file": path.relative_to(shared).as_posix(),
                      "device": device, "op": op, "dtype": "fp16", "weight_dtype": "fp16",
                      "timing": VIDUR_TIMING, "latency_s": df[col].to_numpy(float) / 1e3}
            if op in gemms:
                n, k = (np.broadcast_to(x, t.shape) for x in gemms[op])
                f = frame(len(df), **common, family="gemm", b=1, m=t, n=n, k=k,
                          flops=2 * t * n * k, bytes=2 * (t * k + n * k + t * n))
            else:
                fam, width, nbytes, per_elem = vectors[op]
                width = np.broadcast_to(width, t.shape)
                f = frame(len(df), **common, family=fam, b=1, m=t, n=width, k=0,
                          flops=per_elem * t * width, bytes=nbytes)
            frames.append(f[keep])
    frames.append(vidur_attention(shared))
    for path in sorted(root.glob("profiling/network/*/*.csv")):
        folder, kind = path.parent.name, path.stem
        if folder == "h100_pairwise_nvlink" and kind == "send_recv":
            continue  # byte copy of a100_pairwise_nvlink/send_recv.csv (README), not a measurement
        df = pd.read_csv(path, index_col=0)
        device = VIDUR_DEVICES[folder.split("_")[0]]
        workers, per_node = df["num_workers"].to_numpy(), df["devices_per_node"].to_numpy()
        nodes = -(-workers // per_node)
        suffix = np.where(nodes > 1, np.char.add(np.char.add(":", nodes.astype(str)), "nodes"), "")
        size = df["size"].to_numpy(float)
        frames.append(frame(
            len(df), source="vidur", source_file=path.relative_to(shared).as_posix(),
            device=device, family={"all_reduce": "allreduce", "send_recv": "sendrecv"}[kind],
            op=np.char.add(f"nccl:{folder}", suffix.astype(str)).astype(object), dtype="fp16",
            weight_dtype="fp16", b=1, m=size, n=workers.astype(float), k=0, flops=0, bytes=size,
            timing=VIDUR_TIMING, latency_s=df[f"time_stats.{kind}.median"].to_numpy(float) / 1e3))
    return frames


def vidur_attention(shared: Path) -> pd.DataFrame:
    """Legacy A100 attention: Llama-2-70B at TP2 -> 32 q-heads, 4 kv-heads, head_dim 128/GPU."""
    path = shared / "vidur-profiling/legacy/profiling/a100/attention.csv"
    df = pd.read_csv(path)
    heads, kvh, hd = 32.0, 4.0, 128.0
    assert set(df["n_q_head"] / df["num_tensor_parallel_workers"]) == {heads}
    assert set(df["n_kv_head"] / df["num_tensor_parallel_workers"]) == {kvh}
    common = {"source": "vidur", "source_file": path.relative_to(shared).as_posix(),
              "device": "a100-sxm4-80gb", "op": "attn", "dtype": "fp16", "weight_dtype": "fp16",
              "kv_dtype": "fp16", "heads": heads, "kv_heads": kvh, "head_dim": hd, "window": 0,
              "timing": VIDUR_TIMING}
    dec = df[~df["is_prefill"].astype(bool)]
    batch, kv = dec["batch_size"].to_numpy(float), dec["kv_cache_size"].to_numpy(float)
    decode = frame(len(dec), **common, family="attn_decode", b=batch * heads, m=1, n=kv, k=hd,
                   batch=batch, q_len=1, kv_len=kv, flops=4 * batch * heads * hd * kv,
                   bytes=batch * kv * 2 * kvh * hd * 2 + 2 * batch * heads * hd * 2,
                   latency_s=dec["time_stats.attn_decode.median"].to_numpy(float) / 1e3)
    pre = df[df["is_prefill"].astype(bool)]
    q, ctx = pre["prefill_chunk_size"].to_numpy(float), pre["kv_cache_size"].to_numpy(float)
    pairs = attended_keys(q, ctx, None)
    prefill = frame(len(pre), **common, family="attn_prefill", b=heads, m=q, n=q + ctx, k=hd,
                    batch=1, q_len=q, kv_len=q + ctx, flops=4 * heads * hd * pairs,
                    bytes=2 * q * heads * hd * 2 + (q + ctx) * 2 * kvh * hd * 2,
                    latency_s=pre["time_stats.attn_prefill.median"].to_numpy(float) / 1e3)
    return pd.concat([decode, prefill], ignore_index=True)


# ---------------------------------------------------------------------------------------------
# LLMCompass
LLMCOMPASS_DEVICES = {"A100": "a100-sxm4-80gb", "MI210": "mi210"}


def llmcompass(shared: Path) -> list[pd.DataFrame]:
    df = pd.read_csv(shared / "llmcompass/llmcompass_kernels_tidy.csv")
    common = lambda d: {  # noqa: E731
        "source": "llmcompass", "source_file": ("llmcompass/" + d["source_file"]).to_numpy(),
        "device": d["device"].map(LLMCOMPASS_DEVICES).to_numpy(), "op": d["op"].to_numpy(),
        "dtype": "fp16", "weight_dtype": "fp16", "timing": "sync_wallclock",
        "latency_s": d["latency_s"].to_numpy(float)}
    frames = []
    d = df[df["op"] == "matmul"]
    M, N, K = (d[c].to_numpy(float) for c in "MNK")
    frames.append(frame(len(d), **common(d), family="gemm", b=1, m=M, n=N, k=K,
                        flops=2 * M * N * K, bytes=2 * (M * K + K * N + M * N)))
    for op, family, per_elem in (("softmax", "softmax", 5), ("layernorm", "norm", 5)):
        d = df[df["op"] == op]
        M, N = d["M"].to_numpy(float), d["N"].to_numpy(float)
        extra = 2 * 2 * N if op == "layernorm" else 0  # gamma, beta
        frames.append(frame(len(d), **common(d), family=family, b=1, m=M, n=N, k=0,
                            flops=per_elem * M * N, bytes=2 * 2 * M * N + extra))
    d = df[df["op"] == "gelu"]
    el = d["elements"].to_numpy(float)
    frames.append(frame(len(d), **common(d), family="activation", b=1, m=el, n=1, k=0,
                        flops=8 * el, bytes=2 * 2 * el))
    left = set(df["op"]) - {"matmul", "softmax", "layernorm", "gelu"}
    if left:
        raise SystemExit(f"llmcompass: unhandled ops {sorted(left)}")
    return frames


# ---------------------------------------------------------------------------------------------
# Size control, dedup, output
GROUP = ["device", "family", "op", "dtype", "weight_dtype", "kv_dtype"]


def subsample(df: pd.DataFrame, cap: int = CAP) -> pd.DataFrame:
    """At most `cap` rows per GROUP, stratified over floor(log2 _size): strata share the cap
    evenly (water-filling, small strata keep all rows); within a stratum the rows with the
    smallest hash of their shape are kept, so the choice depends on the data alone."""
    keep = np.zeros(len(df), dtype=bool)
    df = df.reset_index(drop=True)
    # moe ops carry their routing config; they are capped per kernel source and distribution
    df["_group_op"] = df["_group_op"].fillna(df["op"]) if "_group_op" in df else df["op"]
    stratum = np.floor(np.log2(np.maximum(df["_size"].to_numpy(float), 1.0))).astype(int)
    order_key = pd.util.hash_pandas_object(df[["op", *SHAPE, "flops", "bytes"]],
                                           index=False).to_numpy()
    group = [c if c != "op" else "_group_op" for c in GROUP]
    for _, idx in df.groupby(group, sort=True).indices.items():
        if len(idx) <= cap:
            keep[idx] = True
            continue
        strata = pd.Series(stratum[idx]).groupby(stratum[idx]).size().sort_values(kind="stable")
        left, quota = cap, {}
        for i, (s, count) in enumerate(strata.items()):
            quota[s] = min(count, left // (len(strata) - i))
            left -= quota[s]
        for s, q in quota.items():
            members = idx[stratum[idx] == s]
            keep[members[np.argsort(order_key[members], kind="stable")[:q]]] = True
    return df[keep]


def dedup(df: pd.DataFrame) -> pd.DataFrame:
    """One row per distinct measurement key (everything but latency and file): median latency,
    first source_file in sort order."""
    keys = [c for c in STORE_COLUMNS if c not in ("latency_s", "source_file")]
    out = df.groupby(keys, dropna=False, sort=False).agg(
        latency_s=("latency_s", "median"), source_file=("source_file", "min")).reset_index()
    return out


def finalize(df: pd.DataFrame) -> pd.DataFrame:
    df = df[list(STORE_COLUMNS)].copy()
    for c in STRINGS:
        df[c] = df[c].astype(str)
    df = dedup(df)
    df = check_measurements(df, "store")
    order = ["source", "device", "family", "op", "dtype", "weight_dtype", "kv_dtype", *SHAPE,
             "split", "timing", "flops", "bytes", "source_file", "latency_s"]
    return df.sort_values(order, kind="mergesort", na_position="last").reset_index(drop=True)


def write(df: pd.DataFrame, path: Path) -> None:
    """zstd Parquet, one row group, no pandas metadata (same frame -> same bytes). Strings are
    large_string and NaN stays NaN (not null), so pyarrow hands both to pandas without copies."""
    arrays = [pa.array(df[c].to_numpy(dtype=object), type=pa.large_string()) if c in STRINGS
              else pa.array(df[c].to_numpy(dtype=float), type=pa.float64())
              for c in STORE_COLUMNS]
    table = pa.Table.from_arrays(arrays, names=list(STORE_COLUMNS))
    pq.write_table(table, path, compression="zstd", compression_level=19,
                   row_group_size=max(len(df), 1), use_dictionary=True, write_statistics=False)


def readme(df: pd.DataFrame, raw_aic: pd.Series, kept_aic: pd.Series, counts: pd.DataFrame,
           size: int) -> str:
    by_family = df.groupby(["source", "family"]).size()
    fam_rows = "\n".join(f"| {s} | {f} | {int(n):,} |" for (s, f), n in by_family.items())
    by_device = df.groupby(["device", "source"]).size().unstack(fill_value=0)
    dev_rows = "\n".join(f"| {d} | " + " | ".join(f"{int(v):,}" for v in row) + " |"
                         for d, row in zip(by_device.index, by_device.to_numpy(), strict=True))
    aic = pd.DataFrame({"measured": raw_aic, "kept": kept_aic}).fillna(0).astype(int)
    aic_rows = "\n".join(f"| {dev} | {fam} | {r.measured:,} | {r.kept:,} |"
                         for (dev, fam), r in aic.iterrows())
    count_rows = "\n".join(f"| {src} | {r.read:,} | {r.subsampled:,} | {r.stored:,} |"
                           for src, r in counts.iterrows())
    return f"""# Shipped kernel measurements (`kernels.parquet`)

{len(df):,} measured kernel latencies on {df['device'].nunique()} GPUs from four public
sources, normalised to `perfcast.measure._schema.STORE_COLUMNS` ({size / 1e6:.2f} MB, zstd
Parquet). Built by `python scripts/build_measurement_store.py [SHARED_DATA_DIR]` from
`shared/data` (this file is generated; edit the script). `source_file` is relative to
`shared/data`; each source's README there names the upstream commit and license. Load it with
`perfcast.measure._store.load_store()`; query it with `query("select ... from kernels")`.

Conventions everywhere: `latency_s` in seconds (AIConfigurator, NeuSight and Vidur publish
milliseconds; LLMCompass's tidy file is already in seconds); `flops` = FLOPs of the kernel;
`bytes` = bytes read + written (element sizes fp32 4, fp16/bf16 2, fp8/int8 1, fp4/int4 0.5);
shapes as `perfcast.ops` uses them (see `_schema.py`); vector and collective rows have b = 1,
k = 0; attention-only columns (batch, heads, kv_heads, head_dim, q_len, kv_len, window) are NaN
elsewhere (moe rows keep the token count in `batch`; their m, the expected tokens per active
local expert, can be below 1). Exact duplicates (every column but latency and file equal) are
merged into one row with the median latency and the first source_file: Vidur's TP-independent
ops repeated across TP degrees and models, AIConfigurator 1.0.0 MLA rows (A100, L40S) with the
same per-GPU heads under two tp_size values (median latency ratio 1.004), a few NeuSight and
LLMCompass repeats.

## Sources

**AIConfigurator** (NVIDIA, Apache-2.0; `timing = cuda_graph`; split ""). TensorRT-LLM tables of
the 9 systems with a catalog device (Intel B60 skipped: no catalog entry).
- `gemm_perf` -> `gemm`, op `gemm` (`gemm_fp8_block` for fp8_block). bfloat16 -> bf16; fp8,
  fp8_block -> fp8; nvfp4 -> fp4; int8_wo / int4_wo -> bf16 math with int8 / int4 weights;
  sq (SmoothQuant W8A8) -> int8. b = 1, flops = 2mnk, bytes = mk·e(dtype) + nk·e(weight) +
  mn·2 (bf16 out).
- `context_attention_perf` -> `attn_prefill`, op `attn`: b = batch·heads, m = n = isl,
  k = head_dim; flops = 4·batch·heads·head_dim·pairs, pairs = `perfcast.ops.attended_keys(isl, 0,
  window or None)`; bytes = Q,K,V read + O write (attn dtype) + KV-cache write (kv dtype).
- `generation_attention_perf` -> `attn_decode`, op `attn`: kv_len = step (tokens in the cache),
  keys = min(kv_len, window) if window else kv_len, n = keys (as `perfcast.ops` sets n),
  flops = 4·batch·heads·head_dim·keys, bytes = batch·keys·2·kv_heads·head_dim·e(kv) + Q and O
  (bf16).
- `context_mla_perf` / `generation_mla_perf` -> attn_prefill / attn_decode, op `mla`, DeepSeek
  dims (qk_nope 128, qk_rope 64, v 128, kv_lora 512). **`num_heads` is already per GPU**
  (upstream `collect_mla.py` logs `num_heads // tp_size`; latency scales with it at every
  tp_size), so heads = num_heads. Prefill: k = head_dim = 192, flops = 2·batch·heads·320·pairs,
  bytes = batch·isl·heads·640·2. Decode (weight-absorbed, MQA over the 576-wide latent):
  k = head_dim = 576, kv_heads = 1, flops = 2·batch·heads·1088·keys, bytes = batch·keys·576·e(kv)
  + batch·heads·1088·2. `mla_*_module_perf` tables are skipped.
- `moe_perf` -> `moe`, op `<kernel_source>:<distribution>:E<experts>:top<k>:tp<t>:ep<e>`
  (fp8_block rows get `_fp8_block` appended to the kernel source when it does not say so, to
  keep them apart from plain fp8). The routing config is in op because b, m, n, k cannot give it
  back, and configs with equal derived shapes (active clamped to 1) were measured up to 10x
  apart; they must not merge as duplicates. Size control caps per `<kernel_source>:<distribution>`.
  inter_local = inter/tp, routed = T·topk/ep, active = max(E/ep·(1-(1-topk/E)^T), 1);
  b = active, m = routed/active, k = hidden, batch = T; gated kernels (3 matrices): n =
  2·inter_local, flops = 2·routed·3·hidden·inter_local, bytes = active·3·hidden·inter_local·e(w)
  + T·hidden·2·2; `moe_torch_flow_nongated` kernels (2 matrices: up, down) use 2 in place of 3 and
  n = inter_local. moe_dtype -> (math, weights): bfloat16 (bf16, bf16), fp8 and fp8_block (fp8,
  fp8), nvfp4 (fp4, fp4), w4afp8 (fp8, int4), w4a8_mxfp4_mxfp8 (fp8, fp4: MXFP4 weights, MXFP8
  activations), w4a16_mxfp4 (bf16, fp4). Unknown names warn and are kept as bf16.
- `nccl_perf` -> allreduce / allgather / reducescatter / alltoall, op `nccl`;
  `custom_allreduce_perf` -> allreduce, op `trtllm_custom`. m = bytes = message_size (elements)
  × element size (half 2, int8 1, bfloat16 2), n = num_gpus, flops = 0.
- Size control: AIConfigurator groups (device, family, op, dtype, weight_dtype, kv_dtype) above
  {CAP:,} rows keep {CAP:,}, stratified over floor(log2 x) with x = m (gemm), isl (prefill),
  kv_len·batch (decode), num_tokens (moe): strata share the cap evenly and small strata keep every
  row; inside a stratum the rows with the smallest pandas hash of their shape are kept
  (deterministic, data-dependent only). Smaller groups are kept whole.

| device | family | measured rows | kept |
|---|---|---|---|
{aic_rows}

**NeuSight** (ASPLOS 2025 artifact, MIT; `timing = eager`; split = its train/test). All FP32.
`bmm` (torch.bmm A[B,M,N]·X[B,N,K], N reduced) -> gemm b=B, m=M, n=K, k=N; `linear`
(nn.Linear(N,K) on [B,M,N]) -> gemm b=1, m=B·M, n=K, k=N; `conv` -> implicit GEMM b=1,
m=B·out², n=out_ch, k=in_ch·kernel² with out = floor((in+2·pad-kernel)/stride)+1; vector ops on
[B,H] -> m=B, n=H: add/mul/pow/div (elementwise, 3 tensors), addu/mulu/powu/divu (elementwise,
2), relu/gelu/tanh (activation, 2), softmax (2), ln (norm, 2 + gamma/beta); FLOPs per element 1
(add, mul, relu), 4 (div, pow), 8 (gelu, tanh), 5 (softmax, ln). Bytes at 4 per element.
`scripts/asplos/fp16mm.csv` (9 FP16 bmm points, split "test") is included as **h100-sxm**: the
file names no GPU, but 512×1024³ at 366 TFLOP/s exceeds every pre-Hopper FP16 peak and NeuSight's
only Hopper GPU is its H100 80GB HBM3.

**Vidur** (Microsoft, MIT; `timing = {VIDUR_TIMING}`; fp16). Note: Vidur's profiler sums the
GPU time of the op's kernels (kineto), so launch latency is not in these numbers (smallest adds:
1 µs). `profiling/compute/<gpu>/<model>/mlp.csv` (a100 -> a100-sxm4-80gb, h100 -> h100-sxm,
a40 -> a40), per TP shard: attn_pre_proj, attn_post_proj, mlp_up_proj, mlp_down_proj -> gemm
(bytes 2·(mk+nk+mn)); input/post_attention_layernorm -> norm; mlp_act -> activation; attn_rope ->
rope; add -> elementwise; emb -> embedding (FLOPs per element as `perfcast.ops`: 4, 8, 3, 1, 0).
`legacy/profiling/a100/attention.csv` (Llama-2-70B at TP2: 32 heads, 4 kv-heads, head_dim 128):
decode rows -> attn_decode (kv_len = kv_cache_size), prefill rows -> attn_prefill (q_len = chunk,
kv_len = n = chunk + cached, pairs = attended_keys(chunk, cached)). Network `all_reduce.csv` /
`send_recv.csv` -> allreduce / sendrecv, m = bytes = size, n = num_workers, op
`nccl:<folder>` plus `:<k>nodes` when the group spans k > 1 nodes (devices_per_node <
num_workers); `h100_pairwise_nvlink/send_recv.csv` is skipped (byte copy of the a100 file).
cpu_overheads.csv and processed_traces are not kernels.

**LLMCompass** (Princeton, BSD-3; `timing = sync_wallclock`; fp16; A100 -> a100-sxm4-80gb,
MI210 -> mi210). matmul -> gemm (b=1, m=M, n=N, k=K, bytes 2·(MK+KN+MN)); softmax -> softmax
(M×N, 5 FLOPs/elem); layernorm -> norm (M×N + gamma/beta); gelu -> activation (m = elements,
n = 1). The GPT-3 layer file is not kernel data and is skipped.

## Rows per source: read, after AIConfigurator size control, stored (after merging duplicates)

| source | read | after size control | stored |
|---|---|---|---|
{count_rows}

## Rows per source and family

| source | family | rows |
|---|---|---|
{fam_rows}

## Rows per device

| device | {' | '.join(by_device.columns)} |
|---|{'---|' * len(by_device.columns)}
{dev_rows}
"""


def aic_framework_frames(shared: Path, framework: str) -> list[pd.DataFrame]:
    """The kernel tables (gemm, attention, MLA, MoE) of one AIC framework folder."""
    return [*aic_gemm(shared, framework), *aic_attention(shared, framework),
            *aic_mla(shared, framework), *aic_moe(shared, framework)]


# One section of README.md per framework store, between these markers (kept by the default
# build, replaced by that framework's build).
SECTION = "<!-- store:{name} -->"
SECTION_END = "<!-- /store:{name} -->"


def _sections(text: str) -> dict[str, str]:
    """The framework sections (name -> text with its markers) of an existing README."""
    found = re.findall(r"(<!-- store:(\w+) -->.*?<!-- /store:\2 -->)", text, flags=re.S)
    return {name: body for body, name in found}


def write_readme(default_text: str | None, framework: str | None = None,
                 section: str | None = None) -> None:
    """README.md = the default store's text, then each framework store's section in
    FRAMEWORKS order; either part is kept from the current file when not given."""
    path = OUT / "README.md"
    old = path.read_text() if path.exists() else ""
    if default_text is None:
        default_text = old.split("<!-- store:", 1)[0]
    sections = _sections(old)
    if framework is not None:
        sections[framework] = (SECTION.format(name=framework) + "\n" + section.strip("\n")
                               + "\n" + SECTION_END.format(name=framework))
    parts = [default_text.rstrip("\n")] + [sections[f] for f in FRAMEWORKS if f in sections]
    path.write_text("\n\n".join(parts) + "\n")


def framework_readme(df: pd.DataFrame, framework: str, raw: pd.Series, size: int) -> str:
    """The README section of one framework store: rows per device x family, the kernel
    sources of each family, the framework version measured on each device."""
    _, name, source = FRAMEWORKS[framework]
    by_dev = df.groupby(["device", "family"]).size().unstack(fill_value=0)
    raw_dev = raw.unstack(fill_value=0).reindex_like(by_dev).fillna(0).astype(int)
    dev_rows = "\n".join(
        f"| {d} | " + " | ".join(f"{int(k):,} / {int(r):,}" for k, r in
                                 zip(by_dev.loc[d], raw_dev.loc[d], strict=True)) + " |"
        for d in by_dev.index)
    kernels = df.assign(op=df["op"].str.split(":").str[0]).groupby(
        ["family", "op", "dtype", "kv_dtype"]).agg(
        rows=("latency_s", "size"), devices=("device", "nunique"))
    ks_rows = "\n".join(f"| {f} | `{o}` | {dt} | {kv or '-'} | {int(r.rows):,} | {r.devices} |"
                         for (f, o, dt, kv), r in kernels.iterrows())
    version = df["source_file"].str.split("/").str[6]  # aiconfigurator/systems/data/<system>/..
    versions = (pd.DataFrame({"device": df["device"], "v": version})
                .groupby("device")["v"].agg(lambda v: ", ".join(sorted(set(v)))))
    ver_rows = "\n".join(f"| {d} | {v} |" for d, v in versions.items())
    return f"""## `{name}`: {framework} kernels (AIConfigurator, `source = {source}`)

{len(df):,} kernel latencies on {df['device'].nunique()} GPUs ({size / 1e6:.2f} MB), built by
`python scripts/build_measurement_store.py --framework {framework}` from the AIConfigurator
tables collected with {framework}'s own kernels (`systems/data/<system>/<family>/{framework}/
<version>/`; the shared data README, section "vLLM and SGLang kernel tables"). Same schema,
converters and conventions as the AIConfigurator rows above (`timing = cuda_graph`), except:
`op` is the table's `kernel_source`, so each kernel (FA3, FA4, flashinfer, triton, cutlass,
DeepGEMM, ...) is its own fixed-cost variant; MLA rows are `mla_<kernel_source>`; MoE ops are
`<kernel_source>:<distribution>:E..:top..:tp..:ep..` as above. Families gemm, attn_prefill,
attn_decode, moe (no collectives). Size control as above with a cap of {FRAMEWORK_CAP:,} rows
per (device, family, op, dtype, weight_dtype, kv_dtype) group (Intel B60 skipped; so are
tables whose device column names another system: upstream's b300_sxm SGLang gemm and
attention tables are byte copies of GB300's). Load with
`perfcast.measure.load_store(source="{framework}")`.

Rows per device and family (stored / measured):

| device | {' | '.join(by_dev.columns)} |
|---|{'---|' * len(by_dev.columns)}
{dev_rows}

{framework} version per device (folder name):

| device | version |
|---|---|
{ver_rows}

Kernel sources (op) per family and dtype:

| family | op | dtype | kv dtype | rows | devices |
|---|---|---|---|---|---|
{ks_rows}"""


def build_framework(shared: Path, framework: str) -> None:
    """kernels_<framework>.parquet and its README section."""
    aic = pd.concat(aic_framework_frames(shared, framework), ignore_index=True)
    raw = aic.groupby(["device", "family"]).size()
    df = finalize(subsample(aic, FRAMEWORK_CAP))
    path = OUT / FRAMEWORKS[framework][1]
    OUT.mkdir(parents=True, exist_ok=True)
    write(df, path)
    size = path.stat().st_size
    write_readme(None, framework, framework_readme(df, framework, raw, size))
    pd.set_option("display.width", 200)
    print(df.groupby(["device", "family"]).size().unstack(fill_value=0).to_string())
    print(f"{len(df):,} rows (of {int(raw.sum()):,} measured), {size / 1e6:.2f} MB -> {path}")


def build_default(shared: Path) -> None:
    """kernels.parquet: TensorRT-LLM AIConfigurator tables, NeuSight, Vidur, LLMCompass."""
    aic = pd.concat([*aic_gemm(shared), *aic_attention(shared), *aic_mla(shared),
                     *aic_moe(shared), *aic_comm(shared)], ignore_index=True)
    raw_aic = aic.groupby(["device", "family"]).size()
    aic = subsample(aic)
    kept_aic = aic.groupby(["device", "family"]).size()
    others = [*neusight(shared), *vidur(shared), *llmcompass(shared)]
    kept = pd.concat([aic, *others], ignore_index=True)
    df = finalize(kept)
    counts = pd.DataFrame({
        "read": pd.concat([pd.Series({"aiconfigurator": int(raw_aic.sum())}),
                           pd.concat(others)["source"].value_counts()]),
        "subsampled": kept["source"].value_counts(),
        "stored": df["source"].value_counts()}).sort_index().astype(int)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "kernels.parquet"
    write(df, path)
    size = path.stat().st_size
    write_readme(readme(df, raw_aic, kept_aic, counts, size))
    print(counts.to_string())
    pd.set_option("display.width", 200)
    print(df.groupby(["source", "family"]).size().to_string())
    print(df.groupby("device").size().to_string())
    print(f"{len(df):,} rows, {size / 1e6:.2f} MB -> {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shared", nargs="?", default="../shared/data",
                        help="the shared data folder (default ../shared/data)")
    parser.add_argument("--framework", choices=list(FRAMEWORKS), default="default",
                        help="default: kernels.parquet (every source); vllm / sglang: "
                             "kernels_<framework>.parquet (that framework's AIC tables)")
    args = parser.parse_args()
    if args.framework == "default":
        build_default(Path(args.shared))
    else:
        build_framework(Path(args.shared), args.framework)


if __name__ == "__main__":
    main()
