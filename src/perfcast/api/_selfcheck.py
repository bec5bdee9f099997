"""`selfcheck`: scenario S8 on the machine at hand. `measure --model` (the model's own
kernels and its whole steps), then `calibrate` on them; the answer is the calibrate check:
per kernel family the held-out error of the shipped model and of the new corrections, and
per measured step the forecast without the calibration, with it (the host speed chosen on
the other steps: held out) and the measured time.

Like `measure`, it measures: its numbers depend on this machine and on how busy it is. Its
files go to `--out` (never overwriting; `--force` to replace) or, without one, to a
temporary folder removed afterwards."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from perfcast.api._base import Group, Request, register, run
from perfcast.api._calibrate import CalibrateRequest, CalibrateResult
from perfcast.api._measure import MeasureRequest, MeasureResult

DEFAULT_SEQ_LEN = 64  # tokens per sequence of a transformer's steps: seconds on one core

__all__ = ["SelfCheckOutputs", "SelfCheckRequest", "SelfCheckResult", "SelfCheckWorkload"]


class SelfCheckWorkload(Group):
    """The model whose kernels and steps are measured, and on what."""

    model: str = Field("gpt2", description="Model to measure and forecast (`perfcast measure "
                       "--model`'s: gpt2, gpt2-medium, resnet18).")
    device: str = Field("cpu", description="cpu, or cuda (the GPU torch sees).")
    batch: int = Field(1, ge=1, le=64, description="Sequences (images) per step.")
    seq_len: int | None = Field(None, ge=1, le=1024, description="Tokens per sequence (and "
                                "the decode step's context); default 64, none for a CNN.")
    quick: bool = Field(False, description="Fewer repeats per step, timed on perfcast's "
                        "hand-written model only (not also on HF transformers').")
    seed: int = Field(0, ge=0, description="Seed of the data and of the calibration's folds.")


class SelfCheckOutputs(Group):
    """Where the measurements and the calibration are kept."""

    out: Path | None = Field(None, description="Folder to keep measurements.parquet (with "
                             "its .device.json and .steps.json) and calibration.json in; "
                             "default: a temporary folder, removed after.")
    force: bool = Field(False, description="Replace those files in --out.")


class SelfCheckRequest(Request):
    """Measure this machine's kernels and steps of a model, calibrate, and check the
    calibration (S8)."""

    command = "selfcheck"
    workload: SelfCheckWorkload = SelfCheckWorkload()
    outputs: SelfCheckOutputs = SelfCheckOutputs()


@dataclass(frozen=True)
class ResolvedSelfCheck:
    request: SelfCheckRequest


def resolve_selfcheck(request: SelfCheckRequest) -> ResolvedSelfCheck:
    return ResolvedSelfCheck(request)


def _mape(errors: list[float | None]) -> float | None:
    kept = [abs(e) for e in errors if e is not None]
    return float(np.mean(kept)) if kept else None


@dataclass(frozen=True)
class SelfCheckResult:
    """The measurement and the calibration it produced, with the check's summary."""

    request: SelfCheckRequest
    measured: MeasureResult
    calibrated: CalibrateResult
    folder: Path | None

    def payload(self) -> dict[str, Any]:
        c, host = self.calibrated, self.calibrated.host
        steps = [] if host is None else list(host.steps)
        return {
            "device": c.device.name, "stack": c.stack, "model": self.request.workload.model,
            "kernel_rows": len(c.rows), "families": [k.to_dict() for k in c.result.checks],
            "families_calibrated": c.families, "families_kept_shipped": c.result.kept,
            "host_speed": None if host is None else host.host_speed,
            "host_speed_fitted": None if host is None else host.kept,
            "steps": steps,
            "step_mape_uncalibrated": _mape([s["uncalibrated_error"] for s in steps]),
            "step_mape_calibrated_held_out": _mape([s["held_out_error"] for s in steps]),
            "warnings": c.warnings(),
            "files": None if self.folder is None else str(self.folder),
        }


def _run_in(folder: Path, r: ResolvedSelfCheck) -> tuple[MeasureResult, CalibrateResult]:
    from perfcast.ops import CNN_MODELS

    w, o = r.request.workload, r.request.outputs
    data = folder / "measurements.parquet"
    extra = {"runners": "perfcast"} if w.quick else {}
    if w.seq_len is not None or w.model not in CNN_MODELS:
        extra["seq_len"] = w.seq_len or DEFAULT_SEQ_LEN
    measured = run(MeasureRequest.from_options(
        device=w.device, model=w.model, batch=w.batch, quick=w.quick, seed=w.seed, out=data,
        force=o.force, **extra))
    spec = {"device_spec": measured.device_path} if w.device == "cpu" else {}
    calibrated = run(CalibrateRequest.from_options(
        measurements=data, device=measured.device, out=folder / "calibration.json",
        force=o.force, seed=w.seed, **spec))
    return measured, calibrated


def execute_selfcheck(r: ResolvedSelfCheck) -> SelfCheckResult:
    out = r.request.outputs.out
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        return SelfCheckResult(r.request, *_run_in(out, r), out)
    with tempfile.TemporaryDirectory(prefix="perfcast-selfcheck-") as tmp:
        return SelfCheckResult(r.request, *_run_in(Path(tmp), r), None)


register(SelfCheckRequest, resolve_selfcheck, execute_selfcheck)
