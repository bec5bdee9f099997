"""Kernel times -> one step's time, with its breakdown kept.

Eager PyTorch is a producer-consumer queue: the host dispatches kernel j at H_j = j·d (d: the
per-kernel dispatch cost), the GPU starts it at max(H_j, end of kernel j-1). The step ends at
max_j(H_j + Σ_{i≥j} t_i): GPU-bound when kernels are long, host-bound when they are short.
CUDA graphs replay the whole step with one launch, so only the kernels remain. On a CPU host
and compute share the thread, so eager time is Σ(t_i + d).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import pandas as pd

from perfcast.comm import CollectiveModel, default_collective_model
from perfcast.compose._execution import Execution
from perfcast.errors import InputError
from perfcast.kernels import (
    ExecutionTimeModel,
    RooflineModel,
    default_time_model,
    step_interval,
)
from perfcast.ops import COMM_FAMILIES
from perfcast.specs import Cluster, Device

__all__ = ["EAGER_DISPATCH_S", "Execution", "StepForecast", "TieredTimeModel",
           "kernel_sequence", "model_tier", "step_time", "step_times"]

# Host cost of one eager PyTorch op (Python, ATen dispatch, cudaLaunchKernel): the median
# launch term fitted on NeuSight's CUDA-event-timed single ops (shipped calibration,
# launch_s["eager"] of the fp32 families on A100-40GB: 11-16 us, events included).
EAGER_DISPATCH_S = 12e-6


@dataclass(frozen=True)
class StepForecast:
    """One step: totals in seconds and the priced op table (`time_s` per instance,
    `total_s` = time_s x count).

    `launch_s` is the time the GPU sat idle waiting for the host (eager only); `interval_s`
    the (low, high) 90% interval when an uncertainty model priced it."""

    time_s: float
    kernel_s: float
    comm_s: float
    launch_s: float
    host_s: float
    ops: pd.DataFrame
    interval_s: tuple[float, float] | None = None

    def by(self, column: str) -> pd.DataFrame:
        """Seconds per value of an op-table column ('family', 'layer', 'op'), largest first,
        plus 'launch' and 'host' rows, so the rows sum to the step time."""
        g = self.ops.groupby(column, sort=False)["total_s"].sum()
        extra = {k: v for k, v in (("launch", self.launch_s), ("host", self.host_s)) if v}
        if extra:
            g = pd.concat([g, pd.Series(extra)])
        g = g.sort_values(ascending=False).rename_axis(column).rename("total_s")
        return g.reset_index().assign(share=lambda d: d["total_s"] / max(self.time_s, 1e-30))

    def breakdown(self) -> dict[str, float]:
        """Totals by kind of time, then seconds per kernel family."""
        g = self.ops.groupby("family", sort=False)["total_s"].sum()
        return {"kernels_s": self.kernel_s, "comm_s": self.comm_s, "launch_s": self.launch_s,
                "host_s": self.host_s, **{f"family.{k}": float(v) for k, v in g.items()}}


def kernel_sequence(ops: pd.DataFrame) -> np.ndarray:
    """Row index of every kernel launch in issue order: each run of consecutive rows sharing
    (layer, phase, count) is one block repeated `count` times (a layer stack)."""
    keys = list(zip(ops["layer"], ops["phase"], ops["count"], strict=True))
    counts = ops["count"].to_numpy(dtype=np.int64)
    out, start = [], 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or keys[i] != keys[start]:
            out.append(np.tile(np.arange(start, i), int(counts[start])))
            start = i
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def _eager_end_s(durations: np.ndarray, dispatch_s: float) -> float:
    """End of the last kernel of the host->GPU queue (module docstring)."""
    if not len(durations):
        return 0.0
    issued = dispatch_s * np.arange(1, len(durations) + 1)
    suffix = np.cumsum(durations[::-1])[::-1]
    return float(np.max(issued + suffix))


def step_time(ops: pd.DataFrame, cluster: Cluster, execution: Execution | str = "cuda-graph",
              host_s: float = 0.0, time_model: ExecutionTimeModel | None = None,
              comm_model: CollectiveModel | None = None,
              dispatch_s: float | None = None, *,
              host_spread: tuple[float, float] = (1.0, 1.0)) -> StepForecast:
    """step = kernels and collectives in issue order, the host->GPU queue when eager, plus
    `host_s` of engine work between steps (not overlapped). `host_spread` (low, high): the
    factor by which another host's CPU time may differ; it widens the 90% interval only."""
    return step_times([ops], cluster, execution, host_s, time_model, comm_model, dispatch_s,
                      host_spread=host_spread)[0]


def step_times(tables: Sequence[pd.DataFrame], cluster: Cluster,
               execution: Execution | str = "cuda-graph", host_s: float = 0.0,
               time_model: ExecutionTimeModel | None = None,
               comm_model: CollectiveModel | None = None,
               dispatch_s: float | None = None, *, intervals: bool = True,
               host_spread: tuple[float, float] = (1.0, 1.0)) -> list[StepForecast]:
    """`step_time` of each op table, the tables priced together in one kernel-model call and
    one collective-model call (a sweep's distinct steps at once); `intervals=False` leaves
    the 90% intervals out (None), for callers that use the times only."""
    try:
        execution = Execution(execution)
    except ValueError:
        raise InputError("execution", f"unknown mode {execution!r}",
                         [e.value for e in Execution]) from None
    if dispatch_s is not None and not dispatch_s >= 0:
        raise InputError("dispatch_s", f"must be >= 0 seconds, got {dispatch_s}", ">= 0")
    if not 0 < host_spread[0] <= 1 <= host_spread[1]:
        raise InputError("host_spread", f"must be 0 < low <= 1 <= high, got {host_spread}",
                         "0 < low <= 1 <= high")
    if not tables:
        return []
    time_model = time_model or default_time_model()
    comm_model = comm_model or default_collective_model()
    ops = tables[0] if len(tables) == 1 else pd.concat(tables, ignore_index=True)
    times = _prices(ops, cluster, time_model, comm_model)
    bounds = np.cumsum([0, *(len(t) for t in tables)])
    return [_step(t, times[a:b], cluster, execution, host_s, time_model if intervals else None,
                  dispatch_s, host_spread)
            for t, a, b in zip(tables, bounds[:-1], bounds[1:], strict=True)]


def _prices(ops: pd.DataFrame, cluster: Cluster, time_model: ExecutionTimeModel,
            comm_model: CollectiveModel) -> np.ndarray:
    """Seconds of one instance of each row: kernels by the time model, collectives by the
    collective model."""
    fam = ops["family"].to_numpy(dtype=object)
    comm = ops["family"].isin(COMM_FAMILIES).to_numpy()
    times = np.asarray(time_model.kernel_times(ops, cluster.device), dtype=float)
    if comm.any():
        times = times.copy()
        times[comm] = comm_model.collective_times(
            fam[comm], ops["m"].to_numpy()[comm], ops["n"].to_numpy()[comm], cluster)
    return times


def _step(ops: pd.DataFrame, times: np.ndarray, cluster: Cluster, execution: Execution,
          host_s: float, time_model: ExecutionTimeModel | None,
          dispatch_s: float | None, host_spread: tuple[float, float] = (1.0, 1.0)
          ) -> StepForecast:
    """One step from its priced rows (module docstring); the interval from `time_model`'s
    tier (None: no interval), its ends moved by the host time of a host `host_spread` times
    as slow/fast."""
    device = cluster.device
    comm = ops["family"].isin(COMM_FAMILIES).to_numpy()
    counts = ops["count"].to_numpy(dtype=float)
    kernel_s = float(np.sum(np.where(comm, 0.0, times) * counts))
    comm_s = float(np.sum(np.where(comm, times, 0.0) * counts))
    busy = kernel_s + comm_s
    eager = execution == Execution.EAGER
    queue = times[kernel_sequence(ops)] if eager and device.kind != "cpu" else None

    def launch_s_at(dispatch: float) -> float:
        """Seconds the GPU waits on the host's eager dispatch (0 for a replayed graph)."""
        if not eager:
            return 0.0
        if queue is None:  # a CPU runs its kernels as it issues them
            return dispatch * float(counts.sum())
        return max(_eager_end_s(queue, dispatch) - busy, 0.0)

    d = EAGER_DISPATCH_S if dispatch_s is None else dispatch_s
    launch_s = launch_s_at(d)
    priced = ops.assign(time_s=times, total_s=times * counts)
    tier = model_tier(time_model, device) if time_model is not None else None
    interval = (step_interval(priced, tier, fixed_s=launch_s + host_s, device=device) if tier
                else None)
    if interval is not None and host_spread != (1.0, 1.0):
        low, high = (launch_s_at(d * f) + host_s * f - launch_s - host_s for f in host_spread)
        interval = (interval[0] + low, interval[1] + high)
    return StepForecast(time_s=busy + launch_s + host_s, kernel_s=kernel_s, comm_s=comm_s,
                        launch_s=launch_s, host_s=host_s, ops=priced, interval_s=interval)


@runtime_checkable
class TieredTimeModel(ExecutionTimeModel, Protocol):
    """A kernel time model with an error record: its uncertainty tier on a device
    (`kernels.PhysicsModel`: target-measured or cross-generation)."""

    def tier(self, device: Device) -> str: ...


def model_tier(time_model: ExecutionTimeModel, device: Device) -> str | None:
    """The uncertainty tier of a time model on a device: the calibrated model's own tier,
    'roofline' for the plain roofline, None for models perfcast has no error record of."""
    if isinstance(time_model, RooflineModel):
        return "roofline"
    return time_model.tier(device) if isinstance(time_model, TieredTimeModel) else None
