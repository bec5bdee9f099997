"""`cpu`: scenario X5 on this machine. Calibrate the local CPU with a torch sweep of the
kernels the model launches (the target-measured tier), forecast the eager fp32 forward, then
run the same forward with torch (one thread) and report predicted vs measured, per kernel
family too (each kernel then replayed and timed alone).

Unlike every other command this one measures: its answer depends on this machine and on how
busy it is while the sweep and the timed forwards run."""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pydantic import Field

from perfcast import __version__
from perfcast.api._base import Group, Request, register
from perfcast.errors import InputError, close_matches
from perfcast.specs import Device, Precision, cluster_for, get_model

if TYPE_CHECKING:  # the models, torch and pandas load when a request runs, not for --help
    import pandas as pd

    from perfcast.compose import StepForecast

__all__ = ["CPU_MODELS", "CpuMeasurement", "CpuRequest", "CpuResult", "CpuWorkload",
           "ResolvedCpu", "forecast_and_measure"]

CPU_MODELS: tuple[str, ...] = ("resnet18", "small-transformer")  # small: GPT-2 (124M)
_IMAGE = 224


class CpuWorkload(Group):
    """The forward pass that is forecast, then run."""

    model: str = Field("resnet18", description="resnet18 or small-transformer (GPT-2 124M).")
    batch: int = Field(1, description="Images or sequences per forward.")
    seq_len: int = Field(128, description="Tokens per sequence (small-transformer).")


class CpuMeasurement(Group):
    """How long the calibration sweep and the timing run."""

    quick: bool = Field(False, description="Short sweep and fewer retries (~10 s).")
    repeats: int | None = Field(None, description="Timed forwards (median); default 5, 3 with "
                                "--quick.")
    seed: int = Field(0, ge=0, description="Sweep shapes and model weights seed.")


class CpuRequest(Request):
    """A model's forward on this CPU: forecast (target-measured), then measured (torch)."""

    command = "cpu"
    workload: CpuWorkload = CpuWorkload()
    measurement: CpuMeasurement = CpuMeasurement()


@dataclass(frozen=True)
class ResolvedCpu:
    request: CpuRequest
    torch_models: ModuleType
    repeats: int


def _check(model: str, batch: int, seq_len: int, repeats: int | None) -> None:
    if model not in CPU_MODELS:
        hint = close_matches(model, CPU_MODELS) or list(CPU_MODELS)
        raise InputError("model", f"unknown model {model!r}; did you mean {', '.join(hint)}?",
                         CPU_MODELS)
    for field, value, low, high in (("batch", batch, 1, 64), ("seq_len", seq_len, 1, 1024),
                                    ("repeats", repeats or 1, 1, 100)):
        if not low <= value <= high:
            raise InputError(field, f"must be in [{low}, {high}], got {value}",
                             f"{low}..{high}")


def _torch_models() -> ModuleType:
    """The torch models module, imported only when torch is there."""
    try:
        from perfcast.measure import torch_models
    except ImportError:
        raise InputError("torch", "perfcast cpu runs the model with PyTorch, which is not "
                         "installed", "pip install 'perfcast[torch]'") from None
    return torch_models


def resolve_cpu(request: CpuRequest) -> ResolvedCpu:
    w, m = request.workload, request.measurement
    _check(w.model, w.batch, w.seq_len, m.repeats)
    return ResolvedCpu(request, _torch_models(), m.repeats or (3 if m.quick else 5))


def _case(tm: ModuleType, model: str, batch: int, seq_len: int
          ) -> tuple[pd.DataFrame, object, tuple]:
    """The op table the forecast prices and the torch model that runs it."""
    from perfcast.ops import cnn_ops, eager_ops

    if model == "resnet18":
        net, inputs = tm.resnet18_case(batch, _IMAGE)
        return cnn_ops("resnet18", batch, _IMAGE), net, inputs
    net, inputs = tm.gpt2_case(batch, seq_len)
    ops = eager_ops(get_model("gpt2"), batch, seq_len, precision=Precision.uniform("fp32"))
    return ops, net, inputs


def _families(forecast: StepForecast, alone: list[tuple[str, float]]
              ) -> dict[str, dict[str, float]]:
    """Per kernel family: forecast seconds and the family's kernels timed alone."""
    import pandas as pd

    from perfcast.measure import TORCH_OPS

    predicted = forecast.ops.groupby("family")["total_s"].sum()
    frame = pd.DataFrame(alone, columns=["op", "seconds"])
    measured = frame.groupby(frame["op"].map(TORCH_OPS))["seconds"].sum()
    out = {}
    for family in sorted(set(predicted.index) | set(measured.index)):
        p, m = float(predicted.get(family, 0.0)), float(measured.get(family, 0.0))
        out[family] = {"predicted_s": p, "measured_alone_s": m,
                       "error": (p - m) / m if m else None}
    return out


@dataclass(frozen=True)
class CpuResult:
    """The forecast of the forward on this CPU, what it measured, and how long each phase
    of the run took."""

    request: CpuRequest
    device: Device
    forecast: StepForecast
    tier: str
    measured: dict[str, Any]
    families: dict[str, dict[str, float | None]]
    sweep_points: int
    sweep_ops: list[str]
    repeats: int
    wall_s: float
    phases: dict[str, float]

    @property
    def predicted_s(self) -> float:
        return self.forecast.time_s

    @property
    def measured_s(self) -> float:
        return self.measured["seconds"]

    @property
    def error(self) -> float:
        """(predicted - measured) / measured."""
        return (self.predicted_s - self.measured_s) / self.measured_s

    def payload(self) -> dict[str, Any]:
        w, m = self.request.workload, self.request.measurement
        return {
            "perfcast_version": __version__, "model": w.model, "batch": w.batch,
            "seq_len": w.seq_len if w.model != "resnet18" else None,
            "device": self.device.name, "arch": self.device.arch, "dtype": "fp32",
            "threads": 1, "quick": m.quick, "seed": m.seed,
            "predicted_s": self.predicted_s, "measured_s": self.measured_s,
            "error": self.error, "measured_quiet": self.measured["quiet"],
            "reference_slowdown": self.measured["slowdown"],
            "sweep_points": self.sweep_points, "sweep_ops": self.sweep_ops, "tier": self.tier,
            "families": self.families, "repeats": self.repeats, "wall_s": self.wall_s,
            "phases": self.phases,
        }


def forecast_and_measure(r: ResolvedCpu) -> CpuResult:
    """X5 end to end: sweep, forecast, measure the forward, time each kernel alone."""
    from perfcast.compose import step_time
    from perfcast.kernels import PhysicsModel, add_target_corrections, shipped_calibration
    from perfcast.measure import (
        TORCH_OPS,
        local_cpu_device,
        measure_torch_dispatch_s,
        run_torch_cpu_sweep,
        with_achieved_peak,
    )

    w, m, tm = r.request.workload, r.request.measurement, r.torch_models
    start = time.perf_counter()
    ops, net, inputs = _case(tm, w.model, w.batch, w.seq_len)
    used = sorted(set(ops["op"].str.split(":").str[0]) & set(TORCH_OPS))
    phases = {}
    baseline = tm.reference_s()  # this CPU's speed while the sweep runs
    sweep = run_torch_cpu_sweep(quick=m.quick, repeats=3 if m.quick else 5, seed=m.seed,
                                ops=used)
    phases["sweep_s"] = time.perf_counter() - start
    device = with_achieved_peak(local_cpu_device(), sweep)
    calibration = add_target_corrections(shipped_calibration(), sweep,
                                         devices={device.name: device})
    forecast = step_time(ops, cluster_for(device, 1), execution="eager",
                         time_model=PhysicsModel(calibration),
                         dispatch_s=measure_torch_dispatch_s())
    phases["forecast_s"] = time.perf_counter() - start - phases["sweep_s"]
    measured = tm.measure_forward_s(net, inputs, baseline, repeats=r.repeats,
                                    attempts=2 if m.quick else 5,
                                    wait_s=0.5 if m.quick else 1.5)
    phases["measure_s"] = time.perf_counter() - start - sum(phases.values())
    alone = tm.kernels_alone_s(net, inputs, repeats=1 if m.quick else 3)
    phases["kernels_alone_s"] = time.perf_counter() - start - sum(phases.values())
    return CpuResult(r.request, device, forecast, PhysicsModel(calibration).tier(device),
                     measured, _families(forecast, alone), len(sweep), used, r.repeats,
                     time.perf_counter() - start, phases)


register(CpuRequest, resolve_cpu, forecast_and_measure)
