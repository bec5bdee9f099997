"""Kernel times -> one step's time, with its breakdown kept."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pandas as pd

from perfcast.comm import CollectiveModel, RingAlphaBeta
from perfcast.errors import InputError
from perfcast.kernels import ExecutionTimeModel, RooflineModel
from perfcast.ops import COMM_FAMILIES
from perfcast.specs import Cluster

__all__ = ["Execution", "StepForecast", "step_time"]


class Execution(StrEnum):
    EAGER = "eager"
    CUDA_GRAPH = "cuda-graph"


@dataclass(frozen=True)
class StepForecast:
    """One step: totals in seconds and the priced op table (`time_s` per instance,
    `total_s` = time_s x count, launch included)."""

    time_s: float
    kernel_s: float
    comm_s: float
    launch_s: float
    host_s: float
    ops: pd.DataFrame

    def by(self, column: str) -> pd.DataFrame:
        """Seconds per value of an op-table column ('family', 'layer', 'op'), largest first,
        plus a 'host' row, so the rows sum to the step time."""
        g = self.ops.groupby(column, sort=False)["total_s"].sum()
        if self.host_s:
            g = pd.concat([g, pd.Series({"host": self.host_s})])
        g = g.sort_values(ascending=False).rename_axis(column).rename("total_s")
        return g.reset_index().assign(share=lambda d: d["total_s"] / max(self.time_s, 1e-30))

    def breakdown(self) -> dict[str, float]:
        """Totals by kind of time, then seconds per kernel family."""
        fams = self.by("family").set_index("family")["total_s"]
        return {"kernels_s": self.kernel_s, "comm_s": self.comm_s, "launch_s": self.launch_s,
                "host_s": self.host_s, **{f"family.{k}": float(v) for k, v in fams.items()}}


def step_time(ops: pd.DataFrame, cluster: Cluster, execution: Execution | str = "cuda-graph",
              host_s: float = 0.0, time_model: ExecutionTimeModel | None = None,
              comm_model: CollectiveModel | None = None) -> StepForecast:
    """step = sum(kernels) + launches (eager only) + collectives (not overlapped) + host."""
    try:
        execution = Execution(execution)
    except ValueError:
        raise InputError("execution", f"unknown mode {execution!r}",
                         [e.value for e in Execution]) from None
    time_model = time_model or RooflineModel()
    comm_model = comm_model or RingAlphaBeta()
    device = cluster.device
    fam = ops["family"].to_numpy(dtype=object)
    comm = ops["family"].isin(COMM_FAMILIES).to_numpy()
    times = time_model.kernel_times(ops, device)
    if comm.any():
        times = times.copy()
        times[comm] = comm_model.collective_times(
            fam[comm], ops["m"].to_numpy()[comm], ops["n"].to_numpy()[comm], cluster)
    counts = ops["count"].to_numpy(dtype=float)
    launch = 0.0 if execution == Execution.CUDA_GRAPH else device.kernel_launch_overhead_s
    per_row_launch = np.where(comm, 0.0, launch)
    priced = ops.assign(time_s=times, total_s=(times + per_row_launch) * counts)
    kernel_s = float(np.sum(np.where(comm, 0.0, times) * counts))
    comm_s = float(np.sum(np.where(comm, times, 0.0) * counts))
    launch_s = float(np.sum(per_row_launch * counts))
    total = kernel_s + comm_s + launch_s + host_s
    return StepForecast(time_s=total, kernel_s=kernel_s, comm_s=comm_s, launch_s=launch_s,
                        host_s=host_s, ops=priced)
