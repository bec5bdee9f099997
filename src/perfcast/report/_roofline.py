"""The roofline plot (Williams, Waterman and Patterson 2009) of one model step's kernels on
one device: each kernel at its arithmetic intensity (FLOP per byte moved) and the FLOP/s its
forecast time implies, under the device's roofs (one compute roof per matrix dtype the step
uses and the vector fp32 roof, each meeting the memory-bandwidth slope at its ridge point
peak / bandwidth). Points far below the roof are where the kernel model says time is lost.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.kernels import ExecutionTimeModel, PhysicsModel, peak_flops, shipped_calibration
from perfcast.ops import COMM_FAMILIES, TENSOR_FAMILIES
from perfcast.report._figure import colors, new_figure
from perfcast.specs import Device, DType

__all__ = ["roofline_ceilings", "roofline_figure", "roofline_points"]

_POINT_COLUMNS = ["op", "layer", "family", "dtype", "intensity_flop_per_byte",
                  "achieved_flops", "peak_flops", "time_s", "count"]


def roofline_points(ops: pd.DataFrame, device: Device,
                    time_model: ExecutionTimeModel | None = None) -> pd.DataFrame:
    """One row per kernel with FLOPs and bytes (collectives and zero-work rows dropped):
    intensity = FLOPs / (bytes read + written), achieved = FLOPs / time. `ops` is an op
    table; its `time_s` column (a priced table, e.g. StepForecast.ops) is used when present,
    else `time_model` (default: the shipped calibrated kernel model) prices it."""
    missing = {"op", "family", "flops", "bytes_read", "bytes_written", "dtype"} - set(ops)
    if missing:
        raise InputError("ops", f"not an op table: missing columns {sorted(missing)}",
                         "perfcast.ops tables (ops.COLUMNS)")
    kernels = ops[~ops["family"].isin(COMM_FAMILIES)].reset_index(drop=True)
    if "time_s" not in kernels:
        model = time_model or PhysicsModel(shipped_calibration())
        kernels = kernels.assign(time_s=np.asarray(model.kernel_times(kernels, device), float))
    traffic = kernels["bytes_read"] + kernels["bytes_written"]
    keep = ((kernels["flops"] > 0) & (traffic > 0) & (kernels["time_s"] > 0)).to_numpy()
    kernels, traffic = kernels[keep].reset_index(drop=True), traffic[keep].reset_index(drop=True)
    out = kernels.assign(
        intensity_flop_per_byte=kernels["flops"] / traffic,
        achieved_flops=kernels["flops"] / kernels["time_s"],
        peak_flops=peak_flops(kernels, device) if len(kernels) else np.zeros(0))
    for col, default in (("layer", ""), ("count", 1)):
        if col not in out:
            out[col] = default
    return out[_POINT_COLUMNS]


def roofline_ceilings(device: Device, dtypes: list[str] | tuple[str, ...] = ()) -> pd.DataFrame:
    """Roofs: {label, peak_flops, bandwidth_bps, ridge_flop_per_byte}, one per matrix dtype
    in `dtypes` the device lists (matrix-unit peak where given) plus the fp32 vector roof;
    ridge = peak / HBM bandwidth, where the bandwidth slope meets the roof."""
    matrix = {d.value: f for d, f in device.dense_peak_flops.items()}
    matrix.update({d.value: f for d, f in device.matrix_peak_flops.items()})
    rows = [(f"{d} matrix peak", matrix[d]) for d in dict.fromkeys(dtypes) if d in matrix]
    vector = device.dense_peak_flops.get(DType.FP32) or min(device.dense_peak_flops.values())
    rows.append(("fp32 vector peak", vector))
    bw = device.hbm_bandwidth_bps
    return pd.DataFrame([{"label": label, "peak_flops": peak, "bandwidth_bps": bw,
                          "ridge_flop_per_byte": peak / bw} for label, peak in rows])


def roofline_figure(ops: pd.DataFrame, device: Device,
                    time_model: ExecutionTimeModel | None = None, title: str | None = None):
    """Log-log roofline: kernels as points coloured by family (size grows with the share of
    step time), one roof per dtype; y in TFLOP/s, x in FLOP/byte."""
    points = roofline_points(ops, device, time_model)
    if points.empty:
        raise InputError("ops", "no kernel with both FLOPs and bytes to place on a roofline",
                         "an op table of a model step")
    tensor = points[points["family"].isin(TENSOR_FAMILIES | {"moe"})]
    roofs = roofline_ceilings(device, tuple(tensor["dtype"]))
    fig, ax = new_figure(8.5, 5.5)
    x = points["intensity_flop_per_byte"].to_numpy()
    lo = min(x.min(), roofs["ridge_flop_per_byte"].min()) / 4
    hi = max(x.max(), roofs["ridge_flop_per_byte"].max()) * 4
    for i, roof in enumerate(roofs.itertuples(index=False)):
        ridge, peak = roof.ridge_flop_per_byte, roof.peak_flops
        ax.plot([lo, ridge, hi], [roof.bandwidth_bps * lo / 1e12, peak / 1e12, peak / 1e12],
                color="black", lw=1.6 - 0.3 * min(i, 3), ls="-" if i == 0 else "--",
                gid=f"roof:{roof.label}")
        ax.annotate(f"{roof.label} {peak / 1e12:,.0f} TFLOP/s", (hi, peak / 1e12),
                    ha="right", va="bottom", fontsize=8)
    ax.annotate(f"HBM bandwidth {device.hbm_bandwidth_bps / 1e12:.2f} TB/s",
                (lo * 2, device.hbm_bandwidth_bps * lo * 2 / 1e12), xytext=(8, 0),
                textcoords="offset points", ha="left", va="top", fontsize=8)
    time_share = points["time_s"] * points["count"]
    sizes = 12 + 200 * time_share / time_share.sum()
    cmap = colors(len(points["family"].unique()))
    for color, (family, group) in zip(cmap, points.groupby("family", sort=True), strict=True):
        ax.scatter(group["intensity_flop_per_byte"], group["achieved_flops"] / 1e12,
                   s=sizes[group.index], color=color, alpha=0.75, edgecolors="black",
                   linewidths=0.4, label=family, gid=f"kernels:{family}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved throughput (TFLOP/s)")
    ax.set_title(title or f"Roofline of a model step on {device.name}")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(title="kernel family (size: share of time)", fontsize=8, title_fontsize=8,
              loc="lower right")
    return fig

