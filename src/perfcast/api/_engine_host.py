"""How a stack's host drives the GPU: launch mode and host seconds, chosen in one place.

The stack decides (graph capture -> launch mode, its host model -> per-kernel dispatch and
per-step costs, its serving engine's fitted host profile); an explicit `--execution` or
`--host` overrides the stack's choice and the payload says which were given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfcast.compose import HOST_PROFILES, Execution
from perfcast.errors import InputError
from perfcast.specs import GraphCapture, Stack

__all__ = ["EngineHost", "engine_host"]


@dataclass(frozen=True)
class EngineHost:
    """Launch mode, serving host profile, host seconds per eager kernel, per step and per
    generate() token."""

    execution: Execution
    profile: str
    dispatch_s: float
    step_s: float
    given: tuple[str, ...] = ()  # options the user set over the stack's choice
    generate_s: float = 0.0
    host_speed: float = 1.0  # this host against the stack's reference CPU
    host_spread: tuple[float, float] = (1.0, 1.0)  # other hosts' range (intervals only)

    def inputs(self) -> dict[str, Any]:
        return {"execution": str(self.execution), "host": self.profile,
                "host_dispatch_s": self.dispatch_s, "host_step_s": self.step_s,
                "host_generate_s": self.generate_s, "overrides_of_stack": list(self.given)}


def engine_host(stack: Stack, execution: Execution | str | None, profile: str | None,
                host_speed: float = 1.0, training: bool = False) -> EngineHost:
    """The stack's launch mode and host costs on a host `host_speed` times the speed of the
    stack's reference CPU; `execution` / `profile` given by the user replace the stack's.
    `training`: a training iteration's host costs where the stack measured them
    (HostModel.train_dispatch_s, train_step_s)."""
    if not host_speed > 0:
        raise InputError("host_speed", f"must be > 0, got {host_speed}", "> 0")
    given = tuple(n for n, v in (("execution", execution), ("host", profile)) if v is not None)
    if execution is None:
        execution = (Execution.CUDA_GRAPH if stack.graph_capture is GraphCapture.CUDA_GRAPHS
                     else Execution.EAGER)
    try:
        execution = Execution(execution)
    except ValueError:
        raise InputError("execution", f"unknown mode {execution!r}",
                         [e.value for e in Execution]) from None
    profile = profile if profile is not None else (stack.host.serving_profile or "none")
    if profile not in HOST_PROFILES:
        raise InputError("host", f"unknown profile {profile!r}", list(HOST_PROFILES))
    h = stack.host
    dispatch, step = h.op_dispatch_s + h.module_s, h.step_s
    if training and h.train_dispatch_s is not None:
        dispatch, step = h.train_dispatch_s, h.train_step_s
    return EngineHost(execution, profile, dispatch / host_speed, step / host_speed, given,
                      h.generate_s / host_speed, host_speed, h.spread)
