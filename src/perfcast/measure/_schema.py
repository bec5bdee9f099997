"""The measurement table every source is normalised to (the shipped store, `perfcast measure`
output and user calibration files share it)."""

from __future__ import annotations

import pandas as pd

from perfcast.errors import InputError

__all__ = ["STORE_COLUMNS", "TIMING_METHODS", "check_measurements"]

# column -> pandas dtype. Shape columns follow perfcast.ops conventions per family:
#   gemm / conv (as implicit GEMM): b GEMMs of [m, k] x [k, n]
#   attn_prefill / attn_decode: b = batch x heads, m = query tokens, n = keys, k = head dim
#   vector families (norm, activation, elementwise, softmax, rope, embedding): m rows, n width
#   moe: b = active experts, m = tokens per active expert, n = up-projection width, k = hidden
#   collectives: m = message bytes, n = GPUs
STORE_COLUMNS: dict[str, str] = {
    "source": "string",        # aiconfigurator | neusight | vidur | llmcompass | local
    "source_file": "string",   # path relative to shared/data (or the measuring host)
    "split": "string",         # the source's own train/test split where it has one, else ""
    "device": "string",        # perfcast catalog name
    "family": "string",        # perfcast op family
    "op": "string",            # the source's op name (bmm, linear, mlp_up_proj, ...)
    "dtype": "string",         # math dtype (fp32, fp16, bf16, fp8, fp4, int8)
    "weight_dtype": "string",  # storage dtype of weights (int4 for W4A16), else = dtype
    "kv_dtype": "string",      # KV-cache dtype for attention rows, else ""
    "b": "float64", "m": "float64", "n": "float64", "k": "float64",
    "batch": "float64", "heads": "float64", "kv_heads": "float64", "head_dim": "float64",
    "q_len": "float64", "kv_len": "float64", "window": "float64",
    "flops": "float64",
    "bytes": "float64",        # bytes read + written by the kernel (perfcast conventions)
    "timing": "string",        # see TIMING_METHODS
    "latency_s": "float64",
}

TIMING_METHODS = {
    "cuda_graph": "CUDA-graph replay timed with CUDA events: no launch overhead",
    "cuda_event": "one kernel between CUDA events, launched eagerly: launch latency included",
    "kineto": "GPU kernel time summed by the PyTorch profiler: no launch or host time",
    "eager": "one PyTorch op between CUDA events (mean of fastest): dispatch + launch included",
    "sync_wallclock": "host wall clock around op + synchronize: Python dispatch included",
    "cpu_wallclock": "host wall clock around a CPU kernel (median of repeats)",
}


def check_measurements(df: pd.DataFrame, what: str = "measurements") -> pd.DataFrame:
    """The frame with STORE_COLUMNS in order and dtypes, or an InputError naming what is off."""
    missing = [c for c in STORE_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(what, f"missing columns {', '.join(missing)}", list(STORE_COLUMNS))
    bad_timing = sorted(set(df["timing"].unique()) - set(TIMING_METHODS))
    if bad_timing:
        raise InputError(f"{what}.timing", f"unknown values {bad_timing}", list(TIMING_METHODS))
    if (df["latency_s"] <= 0).any() or df["latency_s"].isna().any():
        raise InputError(f"{what}.latency_s", "every latency must be a positive number", "> 0")
    return df[list(STORE_COLUMNS)].astype(STORE_COLUMNS)
