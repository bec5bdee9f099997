"""One training iteration's simulated pipeline schedule, task by task.

`forecast_training` simulates every (stage, micro-batch, chunk, forward/backward) task but
keeps only the totals; `training_schedule` simulates the same tasks for one job (durations
from `train.pipeline_tasks`, the engine's own, through `train.simulate`) and keeps the start
and end of each task, the p2p receives and the tail after the pipeline (exposed gradient
reduction, optimizer, ZeRO parameter all-gather) taken from the forecast's breakdown. A test
pins the makespan to the forecast's own breakdown.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from perfcast.comm import CollectiveModel, default_collective_model
from perfcast.kernels import ExecutionTimeModel
from perfcast.train import TrainForecast, TrainJob, pipeline_tasks, simulate
from perfcast.train import default_time_model as _default_time_model

__all__ = ["TrainSchedule", "training_schedule"]


@dataclass(frozen=True)
class TrainSchedule:
    """`tasks`: one row per task {stage, micro_batch, chunk, backward, start_s, end_s,
    compute_s, exposed_comm_s}; `receives`: one row per p2p receive {stage, from_stage,
    micro_batch, backward, start_s, end_s}; `tail`: the spans after the pipeline's last task
    {name, start_s, end_s}, ending at the iteration time."""

    forecast: TrainForecast
    schedule: str
    stages: int
    micro_batches: int
    chunks: int
    tasks: pd.DataFrame
    receives: pd.DataFrame
    tail: pd.DataFrame

    @property
    def makespan_s(self) -> float:
        """End of the pipeline's last task, sends included."""
        return float(self.tasks["end_s"].max())


def _tail(fc: TrainForecast, zero_stage: int, makespan_s: float) -> pd.DataFrame:
    """After the pipeline: the exposed part of the gradient reduction, the optimizer step,
    (ZeRO-1/2) the updated parameters' all-gather, then what the simulation does not draw
    task by task (SM contention and overlap loss of hidden collectives, stragglers, host
    time, checkpoint stalls), per the forecast's breakdown."""
    b = fc.breakdown
    gather = b["exposed_comm.zero_allgather_s"] if zero_stage in (1, 2) else 0.0
    extra = {name: b[key] for key, name in (
        ("contention_s", "collective SM contention"), ("overlap_loss_s", "overlap loss"),
        ("straggler_s", "waiting for the slowest rank"), ("host_s", "host"),
        ("checkpoint_s", "checkpoint stall"))}
    reduce = max(fc.iteration_time_s - makespan_s - b["optimizer_s"] - gather
                 - sum(extra.values()), 0.0)
    rows, t = [], makespan_s
    for name, dur in (("gradient reduction (exposed)", reduce), ("optimizer step",
                      b["optimizer_s"]), ("parameter all-gather", gather), *extra.items()):
        if dur > 0:
            rows.append({"name": name, "start_s": t, "end_s": t + dur})
            t += dur
    return pd.DataFrame(rows, columns=["name", "start_s", "end_s"])


def training_schedule(job: TrainJob, time_model: ExecutionTimeModel | None = None,
                      comm_model: CollectiveModel | None = None,
                      forecast: TrainForecast | None = None) -> TrainSchedule:
    """The forecast of `job` with every pipeline task's simulated start and end (defaults:
    the models `forecast_training` defaults to). A caller that already holds the forecast of
    `job` with these models passes it as `forecast` instead of having it computed again."""
    from perfcast.train import forecast_training

    time_model = time_model or _default_time_model()
    comm_model = comm_model or default_collective_model()
    fc = forecast or forecast_training(job, time_model=time_model, comm_model=comm_model)
    priced = pipeline_tasks(job, time_model, comm_model)
    sc, kinds, send = priced.schedule, priced.seconds, np.array([priced.send_s])
    fwd = sum(f for f, _ in kinds.values())
    bwd = sum(b for _, b in kinds.values())
    start, end = (a[0] for a in simulate(sc, fwd, bwd, send))
    pick = np.where(sc.backward, 1, 0)
    compute = np.stack(kinds["compute"])[pick, 0, sc.stage, sc.chunk]
    total = np.stack((fwd, bwd))[pick, 0, sc.stage, sc.chunk]
    tasks = pd.DataFrame({"stage": sc.stage, "micro_batch": sc.micro, "chunk": sc.chunk,
                          "backward": sc.backward, "start_s": start, "end_s": end,
                          "compute_s": compute, "exposed_comm_s": total - compute})
    tasks = tasks.sort_values(["stage", "start_s"], kind="stable").reset_index(drop=True)
    cross = np.flatnonzero(sc.cross)
    receives = pd.DataFrame({"stage": sc.stage[cross], "from_stage": sc.stage[sc.dep[cross]],
                             "micro_batch": sc.micro[cross], "backward": sc.backward[cross],
                             "start_s": end[sc.dep[cross]],
                             "end_s": end[sc.dep[cross]] + float(send[0])})
    receives = receives.sort_values(["stage", "start_s"], kind="stable").reset_index(drop=True)
    makespan = float(tasks["end_s"].max())
    return TrainSchedule(forecast=fc, schedule=priced.schedule_kind, stages=sc.p,
                         micro_batches=sc.m, chunks=sc.v, tasks=tasks, receives=receives,
                         tail=_tail(fc, job.plan.zero_stage, makespan))
