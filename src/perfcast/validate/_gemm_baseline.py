"""Plain-roofline accuracy on measured GEMMs: the baseline a fitted kernel model must beat."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pandas as pd

from perfcast.kernels import roofline_times
from perfcast.ops import COLUMNS
from perfcast.specs import bytes_per_element, get_device

__all__ = ["gemm_baseline", "gemm_ops", "load_gemm_slice"]

METHODS = {"roofline": False, "roofline_waves": True}  # method name -> waves flag
_OUT_BYTES = 2.0  # the measured kernels write bf16 Y for every input dtype


def load_gemm_slice() -> pd.DataFrame:
    """The shipped AIConfigurator GEMM sample (see validate/data/README.md for provenance)."""
    with (resources.files("perfcast.validate") / "data" / "aic_gemm_slice.csv").open("rb") as f:
        return pd.read_csv(f)


def gemm_ops(slice_df: pd.DataFrame) -> pd.DataFrame:
    """One op-table row per measured GEMM Y[m,n] = X[m,k]·W[n,k]^T; X and W are both stored
    in the row's dtype (fp8/fp4 GEMMs quantise activations too), Y in bf16."""
    m, n, k = (slice_df[c].to_numpy(dtype=float) for c in ("m", "n", "k"))
    elem = slice_df["dtype"].map(bytes_per_element).to_numpy(dtype=float)
    ops = pd.DataFrame(
        {
            "layer": "bench",
            "op": "gemm",
            "family": "gemm",
            "phase": "bench",
            "b": 1,
            "m": m,
            "n": n,
            "k": k,
            "flops": 2.0 * m * n * k,
            "bytes_read": (m * k + n * k) * elem,
            "bytes_written": m * n * _OUT_BYTES,
            "dtype": slice_df["dtype"].to_numpy(),
            "count": 1,
        },
        index=slice_df.index,
    )
    return ops[COLUMNS]


def _predictions(slice_df: pd.DataFrame) -> pd.DataFrame:
    """Measured and predicted seconds per (row, method), vectorised per device; rows whose
    dtype has no peak on the device (e.g. fp8 on A100) are skipped."""
    parts = []
    for name, rows in slice_df.groupby("device", sort=True):
        device = get_device(name)
        rows = rows[rows["dtype"].isin([d.value for d in device.dense_peak_flops])]
        ops = gemm_ops(rows)
        for method, waves in METHODS.items():
            parts.append(
                pd.DataFrame(
                    {
                        "device": name,
                        "dtype": rows["dtype"].to_numpy(),
                        "method": method,
                        "measured_s": rows["latency_s"].to_numpy(dtype=float),
                        "predicted_s": roofline_times(ops, device, waves=waves),
                    }
                )
            )
    return pd.concat(parts, ignore_index=True)


def gemm_baseline(slice_df: pd.DataFrame | None = None) -> pd.DataFrame:
    """MAPE and 90th-percentile APE (fractions) of the plain roofline, with and without wave
    quantisation, per device x dtype on measured GEMMs (default: the shipped slice)."""
    pred = _predictions(load_gemm_slice() if slice_df is None else slice_df)
    pred["ape"] = np.abs(pred["predicted_s"] - pred["measured_s"]) / pred["measured_s"]
    stats = (
        pred.groupby(["device", "dtype", "method"], sort=True)["ape"]
        .agg(mape="mean", p90_ape=lambda a: float(np.quantile(a, 0.9)), n="size")
        .reset_index()
    )
    stats.insert(0, "split", "all")
    stats["group"] = "gemm/" + stats.pop("dtype")
    return stats[["split", "device", "group", "method", "mape", "p90_ape", "n"]]
