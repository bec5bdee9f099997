"""Multi-GPU compositions of single-GPU step forecasts: data- and pipeline-parallel training.

Data parallel (PyTorch DDP): gradients are all-reduced in buckets while backward runs, so
only the part of the all-reduce that outlasts backward, plus the last bucket (issued when
backward ends), is exposed. Pipeline parallel with one micro-batch: the stages run one after
another, forward then backward, with an activation (and its gradient) sent between stages.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfcast.comm import CollectiveModel, RingAlphaBeta
from perfcast.compose._step import StepForecast
from perfcast.errors import InputError
from perfcast.specs import Cluster

__all__ = ["DDP_BUCKET_BYTES", "ParallelStep", "data_parallel_step", "pipeline_step"]

DDP_BUCKET_BYTES = 25 * 2**20  # torch DistributedDataParallel bucket_cap_mb default


@dataclass(frozen=True)
class ParallelStep:
    time_s: float
    compute_s: float
    exposed_comm_s: float
    comm_s: float


def _backward_s(step: StepForecast) -> float:
    ops = step.ops
    return float(ops.loc[ops["phase"] == "backward", "total_s"].sum())


def data_parallel_step(step: StepForecast, grad_bytes: float, cluster: Cluster, dp: int,
                       comm_model: CollectiveModel | None = None,
                       bucket_bytes: float = DDP_BUCKET_BYTES) -> ParallelStep:
    """One DDP iteration: `step` is one GPU's forward + backward on its share of the batch."""
    if dp < 1:
        raise InputError("dp", f"must be >= 1, got {dp}", ">= 1")
    comm_model = comm_model or RingAlphaBeta()
    if dp == 1 or grad_bytes <= 0:
        return ParallelStep(step.time_s, step.time_s, 0.0, 0.0)
    buckets = max(int(np.ceil(grad_bytes / bucket_bytes)), 1)
    sizes = np.full(buckets, grad_bytes / buckets)
    per = comm_model.collective_times(np.array(["allreduce"] * buckets, dtype=object), sizes,
                                      np.full(buckets, dp), cluster)
    total = float(np.sum(per))
    exposed = max(total - _backward_s(step), 0.0) + float(per[-1])
    exposed = min(exposed, total)
    return ParallelStep(step.time_s + exposed, step.time_s, exposed, total)


def pipeline_step(step: StepForecast, activation_bytes: float, cluster: Cluster, pp: int,
                  comm_model: CollectiveModel | None = None) -> ParallelStep:
    """One micro-batch through `pp` stages and back: `step` is the whole model's forward +
    backward on one GPU (the stages' sum); each boundary sends activations forward and their
    gradients back."""
    if pp < 1:
        raise InputError("pp", f"must be >= 1, got {pp}", ">= 1")
    comm_model = comm_model or RingAlphaBeta()
    if pp == 1:
        return ParallelStep(step.time_s, step.time_s, 0.0, 0.0)
    send = float(comm_model.collective_times(np.array(["sendrecv"], dtype=object),
                                             np.array([activation_bytes]), np.array([2]),
                                             cluster)[0])
    has_backward = bool((step.ops["phase"] == "backward").any())
    comm = (pp - 1) * send * (2 if has_backward else 1)
    return ParallelStep(step.time_s + comm, step.time_s, comm, comm)
