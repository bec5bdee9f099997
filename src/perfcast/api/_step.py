"""`step`: one forward or training iteration of a model, as eager PyTorch runs it.

A single GPU's iteration is the eager kernel graph (`ops.eager_ops`) priced and queued by
`compose.step_time`; data-parallel (DDP bucket overlap) and pipeline-parallel (one micro-batch)
runs compose that step with `compose.data_parallel_step` / `compose.pipeline_step`.
`validate models` builds these same requests, so validation checks this command.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from perfcast import __version__
from perfcast.api._base import Group, Request, register
from perfcast.api._choices import KernelChoice, ModelChoice, collective_model
from perfcast.api._units import MAX_BATCH, MAX_GPUS, MAX_TOKENS
from perfcast.comm import CollectiveModel
from perfcast.compose import (
    Execution,
    ParallelStep,
    StepForecast,
    chrome_trace,
    data_parallel_step,
    pipeline_step,
    step_time,
    step_timeline,
)
from perfcast.errors import InputError, check_output_file, writing
from perfcast.kernels import ExecutionTimeModel
from perfcast.ops import EAGER_MODES, eager_ops
from perfcast.specs import (
    Cluster,
    DType,
    ModelSpec,
    ParallelPlan,
    Precision,
    bytes_per_element,
    cluster_for,
    get_device,
    parse_dtype,
)

__all__ = ["ResolvedStep", "StepEngine", "StepHardware", "StepOutputs", "StepPlan",
           "StepPrecision", "StepRequest", "StepResult", "StepWorkload", "step_layout"]


class StepHardware(Group):
    """One catalog GPU; a multi-GPU step runs on nodes of 8 built around it."""

    gpu: str = Field("a100-sxm4-80gb", description="Catalog GPU name (see `hardware list`).")

    @model_validator(mode="before")
    @classmethod
    def _gpu_only(cls, value: Any) -> Any:
        return {"gpu": value} if isinstance(value, str) else value


class StepPlan(Group):
    """Tensor, pipeline and data parallel degrees (pipeline combines with neither)."""

    num_gpus: int | None = Field(None, ge=1, le=MAX_GPUS, description="GPUs (= tp x pp x dp).")
    tp: int = Field(1, ge=1, le=MAX_GPUS, description="Tensor-parallel degree.")
    pp: int = Field(1, ge=1, le=MAX_GPUS, description="Pipeline stages (one micro-batch).")
    dp: int = Field(1, ge=1, le=MAX_GPUS, description="Data-parallel replicas (DDP).")

    def gpus(self) -> int:
        return step_layout(self.num_gpus, self.tp, self.pp, self.dp)


def step_layout(num_gpus: int | None, tp: int, pp: int, dp: int) -> int:
    """GPUs of a tp x pp x dp layout, checked against `num_gpus` when given."""
    for name, value in (("tp", tp), ("pp", pp), ("dp", dp)):
        if value < 1:
            raise InputError(name, f"must be >= 1, got {value}", ">= 1")
    if pp > 1 and dp > 1 or pp > 1 and tp > 1:
        raise InputError("pp", "pipeline parallel combines with neither --tp nor --dp here",
                         "--pp alone, or --tp/--dp")
    need = tp * pp * dp
    if num_gpus is not None and num_gpus != need:
        raise InputError("num_gpus", f"{num_gpus} GPUs but tp x pp x dp = {need}", str(need))
    return need


class StepWorkload(Group):
    batch: int = Field(1, ge=1, le=MAX_BATCH, description="Sequences in the batch (global, "
                       "across dp).")
    seq_len: int = Field(512, ge=1, le=MAX_TOKENS, description="Tokens per sequence.")
    mode: str = Field("forward", description="forward or training (forward + backward).")


class StepPrecision(Group):
    dtype: str = Field("fp32", description="Weights, activations and math dtype.")


class StepEngine(Group):
    """How the iteration runs: kernel launch mode, fusion, recompute, optimizer step."""

    execution: Execution = Field(Execution.EAGER, description="Kernel launch mode.")
    fused: bool = Field(False, description="Apply the fusion rules (torch.compile-style).")
    recompute: bool = Field(False, description="Full activation recompute (training).")
    optimizer: str | None = Field(None, description="Add the optimizer step (training): "
                                  "adam or sgd.")


class StepOutputs(Group):
    trace: Path | None = Field(None, description="Write a Chrome-trace/Perfetto JSON of the "
                               "step here.")


class StepRequest(Request):
    """Time, 90% interval and where the time goes of one iteration."""

    command = "step"
    model: ModelChoice = ModelChoice()
    hardware: StepHardware = StepHardware()
    plan: StepPlan = StepPlan()
    workload: StepWorkload = StepWorkload()
    precision: StepPrecision = StepPrecision()
    engine: StepEngine = StepEngine()
    kernels: KernelChoice = KernelChoice()
    outputs: StepOutputs = StepOutputs()


@dataclass(frozen=True)
class ResolvedStep:
    request: StepRequest
    model: ModelSpec
    machines: Cluster
    gpus: int
    dtype: DType
    time_model: ExecutionTimeModel
    kernel_info: dict[str, Any]
    comm_model: CollectiveModel


def resolve_step(request: StepRequest) -> ResolvedStep:
    """Checks in the order the command always made them, then the specs."""
    w, plan = request.workload, request.plan
    if w.mode not in EAGER_MODES:
        raise InputError("mode", f"unknown mode {w.mode!r}", list(EAGER_MODES))
    gpus = plan.gpus()
    if w.batch % plan.dp:
        raise InputError("batch", f"{w.batch} sequences do not split over dp={plan.dp}",
                         f"a multiple of {plan.dp}")
    check_output_file(request.outputs.trace, "trace")
    spec = request.model.spec()
    dtype = parse_dtype(request.precision.dtype, "dtype")
    machines = cluster_for(get_device(request.hardware.gpu), gpus)
    time_model, info = request.kernels.resolve(machines.device)
    return ResolvedStep(request, spec, machines, gpus, dtype, time_model, info,
                        collective_model())


@dataclass(frozen=True)
class StepResult:
    """One GPU's step (`step`), the multi-GPU composition on top (`parallel`, None on one
    GPU or with tp only) and the payload's `inputs`."""

    request: StepRequest
    inputs: dict[str, Any]
    step: StepForecast
    parallel: ParallelStep | None = None
    trace: Path | None = None

    @property
    def time_s(self) -> float:
        """The iteration: one GPU's step plus the exposed data/pipeline-parallel comm."""
        return self.step.time_s if self.parallel is None else self.parallel.time_s

    @property
    def exposed_comm_s(self) -> float:
        return 0.0 if self.parallel is None else self.parallel.exposed_comm_s

    @property
    def kernels(self) -> int:
        """Kernel launches in one GPU's step."""
        return int(self.step.ops["count"].sum())

    def payload(self) -> dict[str, Any]:
        one, total = self.step, self.time_s
        low, high = one.interval_s or (one.time_s, one.time_s)
        out = {
            "perfcast_version": __version__, "inputs": self.inputs,
            "time_s": total, "interval_s": {"low": low + total - one.time_s,
                                            "high": high + total - one.time_s, "level": 0.9},
            "breakdown": {**one.breakdown(), **_phases(one),
                          "exposed_parallel_comm_s": self.exposed_comm_s},
            "kernels": self.kernels,
        }
        if self.trace is not None:
            out["trace"] = str(self.trace)
        return out


def _phases(step: StepForecast) -> dict[str, float]:
    """Seconds of kernels per phase (forward, recompute, backward, optimizer)."""
    g = step.ops.groupby("phase", sort=False)["total_s"].sum()
    return {f"phase.{k}": float(v) for k, v in g.items()}


def _parallel(r: ResolvedStep, one: StepForecast) -> ParallelStep | None:
    """DDP: fp32 gradients of a tp shard all-reduced over dp; pipeline: one micro-batch's
    activations sent across each stage boundary."""
    p, w = r.request.plan, r.request.workload
    if p.dp > 1:
        return data_parallel_step(one, 4.0 * r.model.total_params() / p.tp, r.machines, p.dp,
                                  r.comm_model, stride=p.tp)
    if p.pp > 1:
        act = bytes_per_element(r.dtype) * w.batch * w.seq_len * r.model.hidden_size
        return pipeline_step(one, act, r.machines, p.pp, r.comm_model)
    return None


def execute_step(r: ResolvedStep) -> StepResult:
    q = r.request
    w, p, e = q.workload, q.plan, q.engine
    ops = eager_ops(r.model, w.batch // p.dp, w.seq_len, w.mode, Precision.uniform(r.dtype),
                    ParallelPlan(tp=p.tp), e.fused, e.recompute, e.optimizer)
    one = step_time(ops, r.machines, e.execution, time_model=r.time_model,
                    comm_model=r.comm_model)
    inputs = {"model": r.model.name, "gpu": r.machines.device.name, "num_gpus": r.gpus,
              "tp": p.tp, "pp": p.pp, "dp": p.dp, "batch": w.batch, "seq_len": w.seq_len,
              "mode": w.mode, "dtype": r.dtype.value, "execution": str(e.execution),
              "fused": e.fused, "recompute": e.recompute, "optimizer": e.optimizer,
              "kernel_model": r.kernel_info}
    trace = q.outputs.trace
    if trace is not None:
        with writing(trace, "trace"):
            trace.write_text(json.dumps(chrome_trace(step_timeline(one, e.execution))))
    return StepResult(q, inputs, one, _parallel(r, one), trace)


register(StepRequest, resolve_step, execute_step)
