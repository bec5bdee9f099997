"""Discrete-event simulation of LLM serving: workloads, replicas behind a router, per-replica
schedulers (vLLM v0/v1, Sarathi-Serve, Orca, static batching), a paged KV cache with
preemption, and TTFT/TPOT/ITL/throughput/goodput metrics. Step times come from a
`StepTimeModel` (`step_model_for`: `perfcast.compose.ServingStepModel`)."""

from perfcast import _lazy_exports

# Submodule -> the public names it provides, each imported on first use (PEP 562): a request
# or its --help names a ServeConfig or a pool layout without loading the simulator.
_EXPORTS = {
    "_colocate": ("simulate_colocated",),
    "_config": ("ROUTERS", "SCHEDULERS", "ServeConfig"),
    "_disagg": ("DisaggResult", "simulate_disaggregated"),
    "_engine": ("simulate", "step_model_for"),
    "_kv": ("MemoryPlan", "plan_memory"),
    "_metrics": ("ServeResult",),
    "_step_model": ("StatsStepTimeModel", "StepTimeModel"),
    "_workload": ("ARRIVALS", "LENGTHS", "Workload", "make_workload"),
}
__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)

__all__ = [name for names in _EXPORTS.values() for name in names]  # pinned: tests
