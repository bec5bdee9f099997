"""`measure`: time the op families on this machine into a measurement file (perfcast's store
schema), with the device spec beside it in `<out>.device.json`.

With `--model M` (`MeasureModel`), the kernels timed are the model's own: the distinct
(op, shape) kernels of perfcast's eager op tables of its steps, for the stack (`perfcast
step`'s builders; torch kernels); and whole steps (forward, decode, training) are timed end
to end into `<out>.steps.json` (`perfcast.measure.load_steps` reads it), so `calibrate` can
fit the stack's host overhead per kernel on them (`perfcast.measure._model_steps`).

Like `cpu`, this command measures: its rows depend on this machine and on how busy it is
while the sweep runs, so two runs agree in shape (rows, columns, files) but not in timings.

Files are written whole or not at all (a temporary file renamed over the name). Ctrl-C
during the sweep keeps the rows timed so far: they are written to the output, without a
device spec, and `SweepInterrupted` says how many and where (`run`'s caller reports it;
a rerun starts over, with --force)."""

from __future__ import annotations

import importlib.util
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, model_validator

from perfcast.api._base import Group, Request, register
from perfcast.api._choices import _shorthand
from perfcast.errors import InputError, check_output_file, writing
from perfcast.progress import ProgressFn
from perfcast.progress import current as current_progress
from perfcast.specs import Device, get_device

if TYPE_CHECKING:  # the harnesses (and pandas) load when a request runs, not for --help
    import pandas as pd

    from perfcast.measure import ModelStepPlan, StepMeasurements, SweepInterrupted

__all__ = ["BACKENDS", "DEVICES", "SUFFIXES", "MeasureModel", "MeasureOutputs",
           "MeasureRequest", "MeasureResult", "MeasureSweep", "MeasureTarget",
           "ResolvedMeasure", "device_path", "steps_path"]

SUFFIXES = (".parquet", ".csv")
DEVICES = ("cpu", "cuda")
BACKENDS = ("numpy", "torch")


class MeasureTarget(Group):
    """What is timed: the device, and on a CPU which library's kernels."""

    device: str = Field("cpu", description="What to time: cpu or cuda (torch).")
    backend: str | None = Field(None, description="CPU kernels to time: numpy (the op "
                                "families; the default) or torch (eager PyTorch kernels, one "
                                "thread; needs the 'torch' extra). cuda is always torch.")


class MeasureSweep(Group):
    """How many shapes, and how often each is timed."""

    quick: bool = Field(False, description="A small sweep (seconds).")
    repeats: int = Field(5, ge=1, le=1000, description="Timed repeats per shape (median "
                         "kept).")
    seed: int = Field(0, ge=0, description="Seed for the shape list and data.")


class MeasureModel(Group):
    """A model whose own kernels, and whole steps end to end, are timed (torch)."""

    name: str | None = Field(None, alias="model", description="Time this model's own "
                             "kernels and whole steps (gpt2, gpt2-medium, resnet18) into "
                             "<out> and <out>.steps.json.")
    config: str | None = Field(None, alias="model_config", description="Path to a GPT-2-"
                               "type HF config.json instead of --model.")
    stack: str | None = Field(None, description="Software stack the steps emulate: "
                              "hf-transformers (the default; SDPA) or hf-transformers-legacy "
                              "(eager attention).")
    batch: int = Field(1, ge=1, le=256, description="Sequences (images) per step.")
    seq_len: int = Field(128, ge=1, le=4096, description="Tokens per sequence of the "
                         "forward and training steps.")
    context: int | None = Field(None, ge=1, le=4096, description="Cached tokens of the "
                                "decode step (default: --seq-len).")
    dtype: str | None = Field(None, description="Step dtype: fp32 on cpu; bf16 (default), "
                              "fp16 or fp32 on cuda.")
    optimizer: str = Field("adam", description="Training step's optimizer: adam or sgd.")
    modes: str | None = Field(None, description="Steps to time, comma-separated: forward, "
                              "decode, training (default: all the model has).")
    runners: str | None = Field(None, description="Who runs the steps, comma-separated: "
                                "perfcast (hand-written torch models), transformers (HF's "
                                "own; default both when installed).")


class MeasureOutputs(Group):
    """The measurement file (and the device spec written beside it)."""

    out: Path = Field(description="Output file: .parquet or .csv.")
    force: bool = Field(False, description="Overwrite existing files.")

    @model_validator(mode="before")
    @classmethod
    def _bare_path(cls, value: Any) -> Any:
        return _shorthand(str(value), "out") if isinstance(value, (str, Path)) else value


class MeasureRequest(Request):
    """Time gemm, elementwise, activation, softmax and norm kernels on this machine."""

    command = "measure"
    target: MeasureTarget = MeasureTarget()
    model: MeasureModel = MeasureModel()
    sweep: MeasureSweep = MeasureSweep()
    outputs: MeasureOutputs

    @model_validator(mode="before")
    @classmethod
    def _outputs_group(cls, data: Any) -> Any:
        """A missing `outputs` group is a missing `--out` (the error names the option)."""
        return {"outputs": {}, **data} if isinstance(data, dict) else data


def device_path(out: Path) -> Path:
    """Where the device spec of the measurements in `out` is written."""
    return out.with_name(out.name + ".device.json")


def steps_path(out: Path) -> Path:
    """Where the whole steps timed with `--model` are written."""
    return out.with_name(out.name + ".steps.json")


def _target(target: MeasureTarget, model: bool = False) -> tuple[str, str]:
    """(device kind, kernel library): numpy on a CPU unless asked (torch with a model),
    always torch on cuda."""
    kind = target.device.strip().lower()
    if kind not in DEVICES:
        raise InputError("device", f"unknown device {target.device!r}", DEVICES)
    default = "numpy" if kind == "cpu" and not model else "torch"
    lib = (target.backend or default).strip().lower()
    if lib not in BACKENDS:
        raise InputError("backend", f"unknown backend {target.backend!r}", BACKENDS)
    if kind == "cuda" and lib != "torch":
        raise InputError("backend", "cuda kernels are timed with torch", ["torch"])
    if model and lib != "torch":
        raise InputError("backend", "--model times the model's torch kernels", ["torch"])
    return kind, lib


def _check_out(out: Path, force: bool, steps: bool = False) -> Path:
    if out.suffix.lower() not in SUFFIXES:
        raise InputError("out", f"unknown file type {out.suffix or '(none)'!r} for {out}",
                         SUFFIXES)
    for path in (out, device_path(out)) + ((steps_path(out),) if steps else ()):
        check_output_file(path, "out", force)
    return out


# Options of the model group a plain sweep does not read: refused, never ignored.
_MODEL_ONLY = ("stack", "batch", "seq_len", "context", "dtype", "optimizer", "modes",
               "runners")
_TRANSFORMER_ONLY = ("seq_len", "context", "optimizer")


def _split(text: str | None) -> list[str] | None:
    return None if text is None else [p.strip() for p in text.split(",") if p.strip()]


def _model_plan(request: MeasureRequest, kind: str) -> ModelStepPlan | None:
    """The model's kernels and steps to time (None without --model); every refusal names
    its option."""
    from perfcast.measure import plan_model_steps

    m = request.model
    if m.name is None and m.config is None:
        option = request.first_given(*_MODEL_ONLY)
        if option is not None:
            raise InputError(option, "only applies with --model",
                             f"--model NAME, or omit --{option.replace('_', '-')}")
        return None
    if importlib.util.find_spec("torch") is None:
        raise InputError("model", "--model runs the model with PyTorch, which is not "
                         "installed", "pip install 'perfcast[torch]'")
    plan = plan_model_steps(m.name, m.stack or "hf-transformers", model_config=m.config,
                            device=kind, dtype=m.dtype, batch=m.batch, seq_len=m.seq_len,
                            context=m.context, optimizer=m.optimizer, modes=_split(m.modes),
                            runners=_split(m.runners))
    option = request.first_given(*_TRANSFORMER_ONLY) if plan.config is None else None
    if option is not None:
        raise InputError(option, f"{plan.model} is a CNN: its forward takes images",
                         f"omit --{option.replace('_', '-')} for a CNN")
    return plan


@dataclass(frozen=True)
class ResolvedMeasure:
    """The sweep to run (device kind and kernel library) and the file to write."""

    request: MeasureRequest
    kind: str
    backend: str
    out: Path
    plan: ModelStepPlan | None = None  # --model: its kernels and steps


def resolve_measure(request: MeasureRequest) -> ResolvedMeasure:
    model = request.model.name is not None or request.model.config is not None
    kind, lib = _target(request.target, model)
    plan = _model_plan(request, kind)
    out = _check_out(request.outputs.out, request.outputs.force, plan is not None)
    return ResolvedMeasure(request, kind, lib, out, plan)


def _kernels(r: ResolvedMeasure, progress: ProgressFn | None) -> pd.DataFrame:
    """The model's own kernel shapes timed (torch, one CPU thread; or the CUDA sweep, graph
    timed, at the model's shapes of the kinds it has, in the steps' dtype)."""
    from perfcast.measure import local_cpu_device, run_gpu_sweep, run_torch_cpu_sweep

    s, plan = r.request.sweep, r.plan
    if r.kind == "cuda":
        return run_gpu_sweep(repeats=s.repeats, seed=s.seed, shapes=plan.gpu_shapes,
                             dtypes=(plan.dtype,), collectives=False, progress=progress)
    cold = 2.0 * local_cpu_device(threads=1, measure_bandwidth=False).l2_bytes  # LLC x 2
    return run_torch_cpu_sweep(repeats=s.repeats, seed=s.seed, ops=plan.shapes,
                               progress=progress, cold_bytes=cold)


def _sweep(r: ResolvedMeasure, progress: ProgressFn | None) -> pd.DataFrame:
    """The timed rows: numpy or torch kernels on one CPU thread, or torch kernels on cuda
    (with --model: the model's own); `progress(done, total)` after each row."""
    from perfcast.measure import run_cpu_sweep, run_gpu_sweep, run_torch_cpu_sweep

    s = r.request.sweep
    if r.plan is not None:
        return _kernels(r, progress)
    if r.kind == "cuda":
        return run_gpu_sweep(quick=s.quick, repeats=s.repeats, seed=s.seed, progress=progress)
    sweep = run_torch_cpu_sweep if r.backend == "torch" else run_cpu_sweep
    return sweep(quick=s.quick, repeats=s.repeats, seed=s.seed, progress=progress)


def _gpu_spec(name: str) -> Device | None:
    try:
        return get_device(name)
    except InputError:
        return None


def _with_torch_dispatch(spec: Device) -> Device:
    """The CPU spec with torch's per-op dispatch as its launch overhead (what an eager torch
    model pays per kernel on this CPU)."""
    from perfcast.measure import measure_torch_dispatch_s

    sources = {**spec.sources, "kernel_launch_overhead_s": (
        "measured: median seconds of one eager torch op (an allocating add) on 1-element "
        "fp32 tensors, one thread")}
    return spec.model_copy(update={"kernel_launch_overhead_s": measure_torch_dispatch_s(),
                                   "sources": sources})


def _with_launch(spec: Device) -> Device:
    """The GPU's catalog spec with this host's measured launch cost of one tiny kernel
    (eager, back to back) as its launch overhead."""
    from perfcast.measure import measure_launch_s

    sources = {**spec.sources, "kernel_launch_overhead_s": (
        "measured by perfcast measure: median host seconds per eager launch of a tiny "
        "kernel, back to back, on this host")}
    return spec.model_copy(update={"kernel_launch_overhead_s": measure_launch_s(),
                                   "sources": sources})


def _device_spec(r: ResolvedMeasure, df: pd.DataFrame) -> Device | None:
    """The spec written beside the rows: the local CPU (one thread; with torch's dispatch as
    launch overhead for torch kernels), or the catalog GPU the sweep ran on (None if the
    catalog lacks it)."""
    from perfcast.measure import local_cpu_device, with_achieved_peak

    if r.kind == "cuda":
        spec = _gpu_spec(str(df["device"].iloc[0]))
        return None if spec is None else _with_launch(spec)
    spec = with_achieved_peak(local_cpu_device(threads=1), df)
    return _with_torch_dispatch(spec) if r.backend == "torch" else spec


@contextmanager
def _atomic(path: Path) -> Iterator[Path]:
    """A temporary name beside `path` to write to, renamed over `path` once the block
    ends (removed if it fails): a reader sees the old file or the whole new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with writing(path, "out"):
            yield tmp
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _write(df: pd.DataFrame, out: Path) -> None:
    if out.suffix.lower() == ".csv":
        with _atomic(out) as tmp:
            df.to_csv(tmp, index=False)
        return
    try:
        with _atomic(out) as tmp:
            df.to_parquet(tmp, index=False, engine="pyarrow")
    except ImportError:
        raise InputError("out", "writing Parquet needs pyarrow (pip install pyarrow)",
                         "a .csv path, or install pyarrow") from None


def _summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per family and dtype: rows, and median/max achieved GFLOP/s and GB/s."""
    rates = df.assign(gflops=df["flops"] / df["latency_s"] / 1e9,
                      gbs=df["bytes"] / df["latency_s"] / 1e9)
    grouped = rates.groupby(["family", "dtype"], sort=False)
    return grouped.agg(rows=("latency_s", "size"), gflops_median=("gflops", "median"),
                       gflops_max=("gflops", "max"), gbs_median=("gbs", "median"),
                       gbs_max=("gbs", "max")).reset_index()


@dataclass(frozen=True)
class MeasureResult:
    """The measured rows (store schema), their per-family summary, the device spec written
    beside them, the files written and how long the sweep took; with --model, the plan
    (its kernels, the ops not timed) and the whole steps timed."""

    request: MeasureRequest
    measurements: pd.DataFrame
    summary: pd.DataFrame
    device_spec: Device | None
    path: Path
    device_path: Path | None
    seconds: float
    plan: ModelStepPlan | None = None
    steps: StepMeasurements | None = None
    steps_path: Path | None = None

    @property
    def device(self) -> str:
        """The device name the rows carry."""
        return str(self.measurements["device"].iloc[0])

    def payload(self) -> dict[str, Any]:
        spec = self.device_spec
        return {"rows": len(self.measurements), "path": str(self.path), "device": self.device,
                "device_path": None if self.device_path is None else str(self.device_path),
                "device_spec": None if spec is None else spec.model_dump(mode="json"),
                "seconds": round(self.seconds, 3),
                "summary": self.summary.to_dict("records"), "model": self._model(),
                "steps_path": None if self.steps_path is None else str(self.steps_path)}

    def _model(self) -> dict[str, Any] | None:
        """--model: what was timed (the model's kernel shapes, the ops the torch vocabulary
        has no kernel for, each step's mode, shape and median seconds)."""
        plan, steps = self.plan, self.steps
        if plan is None or steps is None:
            return None
        keys = ("mode", "runner", "batch", "seq_len", "context", "optimizer", "kernels",
                "measured_s", "quiet")
        return {"model": plan.model, "stack": plan.stack, "attention": plan.attention,
                "dtype": plan.dtype, "kernel_shapes": plan.kernel_shapes,
                "skipped_ops": list(plan.skipped_ops),
                "steps": [{k: getattr(step, k) for k in keys} for step in steps.steps]}


def _keep(stop: SweepInterrupted, out: Path) -> SweepInterrupted:
    """Ctrl-C in the sweep: the rows timed so far written to `out` (none timed: nothing
    written), and a device spec an earlier run left there removed (--force allowed both
    files to be replaced; it would describe other rows). The same stop, with where."""
    from perfcast.measure import SweepInterrupted

    if stop.rows.empty:
        return stop
    _write(stop.rows, out)
    device_path(out).unlink(missing_ok=True)
    return SweepInterrupted(stop.rows, stop.planned, out)


def _offset(progress: ProgressFn | None, before: int, after: int) -> ProgressFn | None:
    """`progress` for one phase: `before` units done ahead of it, `after` still to come."""
    if progress is None:
        return None
    return lambda done, total: progress(before + done, before + total + after)


def _steps(r: ResolvedMeasure, df: pd.DataFrame, progress: ProgressFn | None
           ) -> StepMeasurements | None:
    """--model: its whole steps timed after its kernels (Ctrl-C keeps the kernel rows)."""
    from perfcast.measure import SweepInterrupted, run_model_steps

    if r.plan is None:
        return None
    s = r.request.sweep
    try:
        return run_model_steps(r.plan, s.quick, s.repeats, s.seed,
                               _offset(progress, len(df), 0))
    except KeyboardInterrupt:
        raise _keep(SweepInterrupted(df, len(df)), r.out) from None


def execute_measure(r: ResolvedMeasure) -> MeasureResult:
    """Run the sweep (with --model: the model's kernels, then its steps), then write the
    rows, the device spec and the steps; progress (`perfcast.progress`) counts rows and
    steps timed, of all. Ctrl-C in the sweep keeps its rows (`_keep`)."""
    from perfcast.measure import SweepInterrupted

    started, progress = time.perf_counter(), current_progress()
    cases = 0 if r.plan is None else len(r.plan.cases)
    try:
        df = _sweep(r, _offset(progress, 0, cases))
    except SweepInterrupted as stop:
        raise _keep(stop, r.out) from None
    steps = _steps(r, df, progress)
    try:
        spec = _device_spec(r, df)
    except KeyboardInterrupt:  # every row timed; the CPU spec was being measured
        raise _keep(SweepInterrupted(df, len(df)), r.out) from None
    seconds = time.perf_counter() - started
    _write(df, r.out)
    spec_path = None
    if spec is not None:
        spec_path = device_path(r.out)
        with _atomic(spec_path) as tmp:
            tmp.write_text(json.dumps(spec.model_dump(mode="json"), indent=2) + "\n")
    written = None
    if steps is not None:
        written = steps_path(r.out)
        with _atomic(written) as tmp:
            tmp.write_text(json.dumps(steps.to_json(), indent=2) + "\n")
    return MeasureResult(r.request, df, _summary(df), spec, r.out, spec_path, seconds,
                         r.plan, steps, written)


register(MeasureRequest, resolve_measure, execute_measure)
