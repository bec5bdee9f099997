"""Where the time goes: one stacked bar per forecast, one segment per component, so several
forecasts (plans, GPUs, precisions) compare side by side. The segments of a bar sum to the
forecast's total (iteration time, end-to-end latency or step time)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from perfcast.compose import InferenceForecast, StepForecast
from perfcast.errors import InputError
from perfcast.report._figure import colors, new_figure, time_unit
from perfcast.train import TrainForecast, iteration_parts

__all__ = ["breakdown_figure", "breakdown_table", "side_legend", "stacked_bars", "stacked_table"]

_KINDS = "TrainForecast, InferenceForecast, StepForecast or a {component: seconds} mapping"


_LABELS = {"compute_s": "compute", "recompute_s": "recompute", "bubble_s": "pipeline bubble",
           "optimizer_s": "optimizer", "contention_s": "comm SM contention",
           "overlap_loss_s": "comm overlap loss", "straggler_s": "stragglers", "host_s": "host",
           "checkpoint_s": "checkpoint"}


def _training_parts(f: TrainForecast) -> dict[str, float]:
    """The parts TrainForecast documents as summing to the iteration
    (perfcast.train.iteration_parts), labelled for a figure."""
    return {_LABELS.get(k) or "exposed comm: " + k.removeprefix("exposed_comm.").removesuffix(
        "_s"): v for k, v in iteration_parts(f.breakdown).items()}


def breakdown_table(forecast) -> pd.Series:
    """Seconds per component of one forecast (zero components dropped), largest first.
    Training: compute, recompute, exposed communication per kind, bubble, optimizer.
    Inference: per kernel family over prefill and every decode step, plus launch and host.
    A step: per kernel family plus launch and host. A mapping is taken as it is."""
    if isinstance(forecast, TrainForecast):
        parts = _training_parts(forecast)
    elif isinstance(forecast, InferenceForecast):
        parts = forecast.breakdown().groupby("family", sort=False)["total_s"].sum().to_dict()
    elif isinstance(forecast, StepForecast):
        parts = forecast.by("family").set_index("family")["total_s"].to_dict()
    elif isinstance(forecast, Mapping | pd.Series):
        parts = {str(k): float(v) for k, v in dict(forecast).items()}
    else:
        raise InputError("forecast", f"cannot break down a {type(forecast).__name__}", _KINDS)
    s = pd.Series(parts, dtype=float, name="seconds").rename_axis("component")
    if (s < 0).any():
        raise InputError("forecast", f"negative component(s) {list(s[s < 0].index)}", ">= 0")
    return s[s > 0].sort_values(ascending=False, kind="stable")


def stacked_table(forecasts, table) -> pd.DataFrame:
    """[component x label] values of several forecasts (`forecasts`: one forecast, or a
    mapping label -> forecast), components ordered by their largest value; 0 where absent."""
    if not isinstance(forecasts, Mapping) or not forecasts or all(
            isinstance(v, int | float) for v in forecasts.values()):
        forecasts = {"forecast": forecasts}
    columns = {str(label): table(f) for label, f in forecasts.items()}
    frame = pd.DataFrame(columns).fillna(0.0)
    order = frame.max(axis=1).sort_values(ascending=False, kind="stable").index
    return frame.loc[order]


def breakdown_figure(forecasts, title: str = "Where the time goes"):
    """Stacked bars: one per forecast (`forecasts`: one, or a mapping label -> forecast),
    one segment per component (see `breakdown_table`), the total printed on top."""
    frame = stacked_table(forecasts, breakdown_table)
    unit, factor = time_unit(float(frame.sum(axis=0).max()))
    return stacked_bars(frame * factor, f"time ({unit})", title, "component",
                        total_fmt="{:,.3g} " + unit)


def stacked_bars(frame: pd.DataFrame, ylabel: str, title: str, legend_title: str,
                 total_fmt: str, width_in: float | None = None):
    """Stacked bar chart of a [segment x bar] table (bars in column order)."""
    fig, ax = new_figure(width_in or 4.5 + 1.4 * frame.shape[1], 5.0)
    x = range(frame.shape[1])
    bottom = pd.Series(0.0, index=frame.columns)
    for color, (segment, row) in zip(colors(len(frame)), frame.iterrows(), strict=True):
        ax.bar(x, row.to_numpy(), bottom=bottom.to_numpy(), color=color, label=str(segment),
               edgecolor="white", linewidth=0.5, gid=f"segment:{segment}")
        bottom = bottom + row
    for i, total in enumerate(bottom):
        ax.annotate(total_fmt.format(total), (i, total), ha="center", va="bottom", fontsize=8)
    labels = [str(c) for c in frame.columns]
    tilt = frame.shape[1] > 3 and not any("\n" in label for label in labels)
    ax.set_xticks(list(x), labels, rotation=20 if tilt else 0, ha="right" if tilt else "center",
                  fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_ylim(0, max(float(bottom.max()), 1e-30) * 1.1)  # room for the totals
    side_legend(ax, legend_title)
    return fig


def side_legend(ax, title: str) -> None:
    """Legend right of the axes, bar segments listed top-down as they are stacked; other
    artists (reference lines) first."""
    handles, labels = ax.get_legend_handles_labels()
    bars = [i for i, h in enumerate(handles) if type(h).__name__ == "BarContainer"]
    rest = [i for i in range(len(handles)) if i not in bars]
    order = rest + bars[::-1]
    ax.legend([handles[i] for i in order], [labels[i] for i in order], title=title,
              fontsize=8, title_fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
