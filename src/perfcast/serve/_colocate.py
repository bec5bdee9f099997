"""Several models served on the same GPUs, each with its own request stream, scheduler and
share of memory (its `gpu_memory_utilization` scaled by `memory_split`: shares of the CUDA
total, the `total` KV budget, whatever the stack's own rule; a `free` budget given outright
is refused), sharing compute one of two ways:

- "time-slice": one model's step at a time on the whole GPU (default CUDA context
  switching at kernel boundaries, approximated at step boundaries): a model that has work
  while another's step runs waits for that step, first come first served; runs of decode
  steps are cut at the next step boundary when the other model is waiting.
- "mps": MPS spatial sharing with fixed partitions (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE):
  model i runs concurrently on `compute_split[i]` of the SMs, peak FLOP/s and memory
  bandwidth, i.e. on a proportionally smaller device.

Each model must use one replica on the same GPUs (the same gpu/cluster and TP x PP).
"""

from __future__ import annotations

from collections import deque
from typing import Literal

from perfcast.errors import InputError
from perfcast.serve._config import ServeConfig
from perfcast.serve._engine import _Simulation, step_model_for
from perfcast.serve._events import EventQueue
from perfcast.serve._metrics import ServeResult
from perfcast.serve._step_model import StepTimeModel
from perfcast.specs import Cluster, KVBudget

__all__ = ["simulate_colocated"]


class _View:
    """One simulation's handle on the shared queue (its payloads tagged with it)."""

    __slots__ = ("shared", "sim")

    def __init__(self, shared: EventQueue):
        self.shared, self.sim = shared, None

    def push(self, time_s: float, priority: int, payload) -> None:
        self.shared.push(time_s, priority, (self.sim, payload))

    def peek_time_s(self) -> float:
        return self.shared.peek_time_s()

    def __len__(self) -> int:
        return len(self.shared)


def _run_shared(shared: EventQueue) -> None:
    """Events of several simulations on one queue, in time order, each handled by the
    simulation that pushed it (through its `_View`)."""
    while len(shared):
        t, kind, (sim, payload) = shared.pop()
        sim.handle(t, kind, payload)


class _TimeSlicedGPU:
    """Who runs a step now, and who waits (first come, first served)."""

    def __init__(self):
        self.owner = None
        self.reserved = None
        self.waiting: deque = deque()

    def acquire(self, sim, rep, t: float) -> bool:
        me = (sim, rep)
        if self.owner is None and self.reserved in (None, me):
            self.reserved = None
            return True
        if me not in self.waiting and self.reserved != me:
            self.waiting.append(me)
            if self.owner is not None:  # its run ends at its next step boundary
                self.owner[0].cut(self.owner[1], t)
        return False

    def hold(self, sim, rep) -> None:
        self.owner = (sim, rep)

    def release(self, t: float) -> None:
        """The GPU is free at `t` (a step ended, or the reserved replica had no work)."""
        self.owner = None
        if self.waiting:
            sim, rep = self.waiting.popleft()
            self.reserved = (sim, rep)
            sim.wake(rep, t)


def _partition(cluster: Cluster, share: float) -> Cluster:
    """The cluster with its GPUs shrunk to `share` of their SMs, FLOP/s and bandwidth."""
    d = cluster.device
    device = d.model_copy(update={
        "sm_count": max(1, round(d.sm_count * share)),
        "dense_peak_flops": {k: v * share for k, v in d.dense_peak_flops.items()},
        "matrix_peak_flops": {k: v * share for k, v in d.matrix_peak_flops.items()},
        "hbm_bandwidth_bps": d.hbm_bandwidth_bps * share})
    return cluster.model_copy(update={"device": device})


def _split(name: str, values, n: int) -> list[float]:
    values = [1.0 / n] * n if values is None else [float(v) for v in values]
    if len(values) != n or any(v <= 0 for v in values) or sum(values) > 1.0 + 1e-9:
        raise InputError(name, f"needs {n} positive shares summing to <= 1, got {values}")
    return values


def simulate_colocated(configs: list[ServeConfig], workloads: list, *,
                       sharing: Literal["time-slice", "mps"] = "time-slice",
                       memory_split=None, compute_split=None, seed: int = 0,
                       step_models: list[StepTimeModel] | None = None
                       ) -> list[ServeResult]:
    """One ServeResult per model (module docstring). `step_models`: one per model for
    time-slicing (built from each config by default; MPS builds its partitioned ones)."""
    n = len(configs)
    if n < 1 or len(workloads) != n:
        raise InputError("workloads", "needs one workload per model")
    if sharing not in ("time-slice", "mps"):
        raise InputError("sharing", f"unknown {sharing!r}", ("time-slice", "mps"))
    first = configs[0]
    for c in configs:
        if c.replicas != 1 or (c.gpu, c.cluster, c.tp, c.pp) != (first.gpu, first.cluster,
                                                                 first.tp, first.pp):
            raise InputError("configs", "co-located models need one replica each on the same "
                             "GPUs (same gpu/cluster, tp and pp)")
    if any(c.kv_budget is KVBudget.FREE for c in configs):
        raise InputError("kv_budget", "co-located models split the CUDA total between them "
                         "(memory_split); a fraction of what each model leaves free "
                         "(TensorRT-LLM's rule) would count the same free memory twice",
                         ["total"])
    memory = _split("memory_split", memory_split, n)
    configs = [ServeConfig(**(c.model_dump() | {"gpu_memory_utilization":
                                                c.gpu_memory_utilization * m,
                                                "kv_budget": KVBudget.TOTAL}))
               for c, m in zip(configs, memory, strict=True)]
    if sharing == "mps":
        compute = _split("compute_split", compute_split, n)
        return [_Simulation(c, w, seed, step_model_for(c, cluster=_partition(
            c.cluster_spec, f)), False).run() for c, w, f in zip(configs, workloads, compute,
                                                                 strict=True)]
    if compute_split is not None:
        raise InputError("compute_split", "only applies to sharing='mps'")
    shared, gpu = EventQueue(), _TimeSlicedGPU()
    sims = []
    for c, w, m in zip(configs, workloads, step_models or [None] * n, strict=True):
        view = _View(shared)
        sim = _Simulation(c, w, seed, m, False, queue=view, device=gpu)
        view.sim = sim
        sims.append(sim)
    for sim in sims:
        sim.begin()
    _run_shared(shared)
    return [sim.result() for sim in sims]
