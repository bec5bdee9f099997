"""Discrete-event simulation of LLM serving: workloads, replicas behind a router, per-replica
schedulers (vLLM v0/v1, Sarathi-Serve, Orca, static batching), a paged KV cache with
preemption, and TTFT/TPOT/ITL/throughput/goodput metrics. Step times come from a
`StepTimeModel` (`step_model_for`: `perfcast.compose.ServingStepModel`)."""

from perfcast.serve._colocate import simulate_colocated
from perfcast.serve._config import ROUTERS, SCHEDULERS, ServeConfig
from perfcast.serve._disagg import DisaggResult, simulate_disaggregated
from perfcast.serve._engine import simulate, step_model_for
from perfcast.serve._kv import MemoryPlan, plan_memory
from perfcast.serve._metrics import ServeResult
from perfcast.serve._step_model import StatsStepTimeModel, StepTimeModel
from perfcast.serve._workload import ARRIVALS, LENGTHS, Workload, make_workload

__all__ = [
    "ARRIVALS", "LENGTHS", "ROUTERS", "SCHEDULERS", "DisaggResult", "MemoryPlan", "ServeConfig",
    "ServeResult", "Workload", "make_workload", "plan_memory", "simulate", "simulate_colocated",
    "simulate_disaggregated", "step_model_for", "StatsStepTimeModel", "StepTimeModel",
]
