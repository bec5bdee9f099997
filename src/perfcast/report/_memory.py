"""Memory per GPU: one stacked bar per forecast (weights, KV cache or activations,
gradients, optimizer states, buffers, runtime) against the device's capacity, so whether a
plan fits, and what to shard or shrink when it does not, is visible at a glance."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from perfcast.compose import InferenceForecast
from perfcast.errors import InputError
from perfcast.ops import MemoryFootprint
from perfcast.report._breakdown import side_legend, stacked_bars, stacked_table
from perfcast.train import TrainForecast

__all__ = ["memory_figure", "memory_table"]

_KINDS = "TrainForecast, InferenceForecast, MemoryFootprint or a {kind: bytes} mapping"


def memory_table(forecast) -> pd.Series:
    """Bytes per GPU by kind (zero kinds dropped): a training forecast's fullest stage, an
    inference forecast's footprint (weights, KV cache, activations, runtime)."""
    if isinstance(forecast, TrainForecast):
        parts = dict(forecast.memory)
    elif isinstance(forecast, InferenceForecast | MemoryFootprint):
        footprint = forecast.memory if isinstance(forecast, InferenceForecast) else forecast
        parts = {k.removesuffix("_bytes"): v for k, v in footprint.as_dict().items()
                 if k != "total_bytes"}
    elif isinstance(forecast, Mapping | pd.Series):
        parts = {str(k): float(v) for k, v in dict(forecast).items()}
    else:
        raise InputError("forecast", f"no memory breakdown in a {type(forecast).__name__}",
                         _KINDS)
    s = pd.Series(parts, dtype=float, name="bytes").rename_axis("kind")
    if (s < 0).any():
        raise InputError("forecast", f"negative memory kind(s) {list(s[s < 0].index)}", ">= 0")
    return s[s > 0]


def _capacity(forecasts, capacity_bytes: float | None) -> float | None:
    if capacity_bytes is not None:
        if not capacity_bytes > 0:
            raise InputError("capacity_bytes", f"must be > 0, got {capacity_bytes}", "> 0")
        return capacity_bytes
    values = forecasts.values() if isinstance(forecasts, Mapping) else [forecasts]
    caps = {f.capacity_bytes for f in values if isinstance(f, TrainForecast)}
    return caps.pop() if len(caps) == 1 else None


def memory_figure(forecasts, capacity_bytes: float | None = None,
                  title: str = "Memory per GPU"):
    """Stacked bars in GB (`forecasts`: one, or a mapping label -> forecast) with a dashed
    line at the device capacity (`capacity_bytes`, or the training forecasts' own when they
    agree)."""
    frame = stacked_table(forecasts, memory_table)
    capacity = _capacity(forecasts, capacity_bytes)
    fig = stacked_bars(frame / 1e9, "memory per GPU (GB)", title, "kind",
                       total_fmt="{:,.1f} GB")
    if capacity is not None:
        ax = fig.axes[0]
        ax.axhline(capacity / 1e9, color="red", ls="--", lw=1.2, gid="capacity",
                   label=f"capacity {capacity / 1e9:,.0f} GB")
        side_legend(ax, "kind")
    return fig
