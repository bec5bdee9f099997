"""`measure`: time the op families on this machine into a measurement file (perfcast's store
schema), with the device spec beside it in `<out>.device.json`.

Like `cpu`, this command measures: its rows depend on this machine and on how busy it is
while the sweep runs, so two runs agree in shape (rows, columns, files) but not in timings.

Files are written whole or not at all (a temporary file renamed over the name). Ctrl-C
during the sweep keeps the rows timed so far: they are written to the output, without a
device spec, and `SweepInterrupted` says how many and where (`run`'s caller reports it;
a rerun starts over, with --force)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import Field, model_validator

from perfcast.api._base import Group, Request, register
from perfcast.api._choices import _shorthand
from perfcast.errors import InputError, check_output_file, writing
from perfcast.measure import (
    SweepInterrupted,
    local_cpu_device,
    measure_torch_dispatch_s,
    run_cpu_sweep,
    run_gpu_sweep,
    run_torch_cpu_sweep,
)
from perfcast.progress import ProgressFn
from perfcast.progress import current as current_progress
from perfcast.specs import Device, get_device

__all__ = ["BACKENDS", "DEVICES", "SUFFIXES", "MeasureOutputs", "MeasureRequest",
           "MeasureResult", "MeasureSweep", "MeasureTarget", "ResolvedMeasure", "device_path"]

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


def _target(target: MeasureTarget) -> tuple[str, str]:
    """(device kind, kernel library): numpy on a CPU unless asked, always torch on cuda."""
    kind = target.device.strip().lower()
    if kind not in DEVICES:
        raise InputError("device", f"unknown device {target.device!r}", DEVICES)
    lib = (target.backend or ("numpy" if kind == "cpu" else "torch")).strip().lower()
    if lib not in BACKENDS:
        raise InputError("backend", f"unknown backend {target.backend!r}", BACKENDS)
    if kind == "cuda" and lib != "torch":
        raise InputError("backend", "cuda kernels are timed with torch", ["torch"])
    return kind, lib


def _check_out(out: Path, force: bool) -> Path:
    if out.suffix.lower() not in SUFFIXES:
        raise InputError("out", f"unknown file type {out.suffix or '(none)'!r} for {out}",
                         SUFFIXES)
    for path in (out, device_path(out)):
        check_output_file(path, "out", force)
    return out


@dataclass(frozen=True)
class ResolvedMeasure:
    """The sweep to run (device kind and kernel library) and the file to write."""

    request: MeasureRequest
    kind: str
    backend: str
    out: Path


def resolve_measure(request: MeasureRequest) -> ResolvedMeasure:
    kind, lib = _target(request.target)
    return ResolvedMeasure(request, kind, lib, _check_out(request.outputs.out,
                                                          request.outputs.force))


def _sweep(r: ResolvedMeasure, progress: ProgressFn | None) -> pd.DataFrame:
    """The timed rows: numpy or torch kernels on one CPU thread, or torch kernels on cuda;
    `progress(done, total)` after each row."""
    s = r.request.sweep
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
    sources = {**spec.sources, "kernel_launch_overhead_s": (
        "measured: median seconds of one eager torch op (an allocating add) on 1-element "
        "fp32 tensors, one thread")}
    return spec.model_copy(update={"kernel_launch_overhead_s": measure_torch_dispatch_s(),
                                   "sources": sources})


def _device_spec(r: ResolvedMeasure, df: pd.DataFrame) -> Device | None:
    """The spec written beside the rows: the local CPU (one thread; with torch's dispatch as
    launch overhead for torch kernels), or the catalog GPU the sweep ran on (None if the
    catalog lacks it)."""
    if r.kind == "cuda":
        return _gpu_spec(str(df["device"].iloc[0]))
    spec = local_cpu_device(threads=1)
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
    beside them, the files written and how long the sweep took."""

    request: MeasureRequest
    measurements: pd.DataFrame
    summary: pd.DataFrame
    device_spec: Device | None
    path: Path
    device_path: Path | None
    seconds: float

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
                "summary": self.summary.to_dict("records")}


def _keep(stop: SweepInterrupted, out: Path) -> SweepInterrupted:
    """Ctrl-C in the sweep: the rows timed so far written to `out` (none timed: nothing
    written), and a device spec an earlier run left there removed (--force allowed both
    files to be replaced; it would describe other rows). The same stop, with where."""
    if stop.rows.empty:
        return stop
    _write(stop.rows, out)
    device_path(out).unlink(missing_ok=True)
    return SweepInterrupted(stop.rows, stop.planned, out)


def execute_measure(r: ResolvedMeasure) -> MeasureResult:
    """Run the sweep, then write the rows and the device spec; progress
    (`perfcast.progress`) counts rows timed, of all. Ctrl-C in the sweep keeps its rows
    (`_keep`)."""
    started = time.perf_counter()
    try:
        df = _sweep(r, current_progress())
    except SweepInterrupted as stop:
        raise _keep(stop, r.out) from None
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
    return MeasureResult(r.request, df, _summary(df), spec, r.out, spec_path, seconds)


register(MeasureRequest, resolve_measure, execute_measure)
