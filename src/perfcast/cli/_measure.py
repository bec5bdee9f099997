"""`perfcast measure`: time the op families on this machine into a measurement file."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from perfcast.cli._common import JsonOption, emit_json, guarded
from perfcast.errors import InputError
from perfcast.measure._cpu import local_cpu_device
from perfcast.measure._harness import run_cpu_sweep, run_gpu_sweep
from perfcast.measure._torch_cpu import measure_torch_dispatch_s, run_torch_cpu_sweep
from perfcast.specs import Device, get_device

console = Console()
SUFFIXES = (".parquet", ".csv")
DEVICES = ("cpu", "cuda")
BACKENDS = ("numpy", "torch")


def _device_path(out: Path) -> Path:
    return out.with_name(out.name + ".device.json")


def _check_out(out: Path, force: bool) -> Path:
    if out.suffix.lower() not in SUFFIXES:
        raise InputError("out", f"unknown file type {out.suffix or '(none)'!r} for {out}",
                         SUFFIXES)
    if not out.parent.is_dir():
        raise InputError("out", f"directory {out.parent} does not exist", "an existing directory")
    for path in (out, _device_path(out)):
        if path.exists() and not force:
            raise InputError("out", f"{path} exists; pass --force to overwrite it",
                             "a new path, or --force")
    return out


def _write(df: pd.DataFrame, out: Path) -> None:
    if out.suffix.lower() == ".csv":
        df.to_csv(out, index=False)
        return
    try:
        df.to_parquet(out, index=False, engine="pyarrow")
    except ImportError:
        raise InputError("out", "writing Parquet needs pyarrow (pip install pyarrow)",
                         "a .csv path, or install pyarrow") from None


def _gpu_spec(name: str) -> Device | None:
    try:
        return get_device(name)
    except InputError:
        return None


def _summary(df: pd.DataFrame) -> pd.DataFrame:
    rates = df.assign(gflops=df["flops"] / df["latency_s"] / 1e9,
                      gbs=df["bytes"] / df["latency_s"] / 1e9)
    grouped = rates.groupby(["family", "dtype"], sort=False)
    return grouped.agg(rows=("latency_s", "size"), gflops_median=("gflops", "median"),
                       gflops_max=("gflops", "max"), gbs_median=("gbs", "median"),
                       gbs_max=("gbs", "max")).reset_index()


def _print(summary: pd.DataFrame, spec: Device | None, out: Path, seconds: float) -> None:
    table = Table(title=f"perfcast measure: {int(summary['rows'].sum())} rows in {seconds:.1f} s")
    for col in ("family", "dtype", "rows", "GFLOP/s p50", "GFLOP/s max", "GB/s p50", "GB/s max"):
        table.add_column(col, justify="left" if col in ("family", "dtype") else "right",
                         no_wrap=True)
    for row in summary.itertuples():
        table.add_row(row.family, row.dtype, str(row.rows), f"{row.gflops_median:,.1f}",
                      f"{row.gflops_max:,.1f}", f"{row.gbs_median:,.1f}", f"{row.gbs_max:,.1f}")
    console.print(table)
    if spec is not None:
        peaks = ", ".join(f"{d} {p / 1e9:,.0f} GFLOP/s" for d, p in spec.dense_peak_flops.items())
        console.print(f"device {spec.name} ({spec.arch}): peak {peaks}; memory bandwidth "
                      f"{spec.hbm_bandwidth_bps / 1e9:,.1f} GB/s")
    console.print(f"wrote {out}" + (f" and {_device_path(out)}" if spec is not None else ""))


def _with_torch_dispatch(spec: Device) -> Device:
    """The CPU spec with torch's per-op dispatch as its launch overhead (what an eager torch
    model pays per kernel on this CPU)."""
    sources = {**spec.sources, "kernel_launch_overhead_s": (
        "measured: median seconds of one eager torch op (an allocating add) on 1-element "
        "fp32 tensors, one thread")}
    return spec.model_copy(update={"kernel_launch_overhead_s": measure_torch_dispatch_s(),
                                   "sources": sources})


@guarded
def measure(
    out: Annotated[Path, typer.Option("--out", help="Output file: .parquet or .csv.")],
    device: Annotated[str, typer.Option(help="What to time: cpu or cuda (torch).")] = "cpu",
    backend: Annotated[str | None, typer.Option(
        help="CPU kernels to time: numpy (the op families; the default) or torch (eager "
             "PyTorch kernels, one thread; needs the 'torch' extra). cuda is always torch.")
    ] = None,
    quick: Annotated[bool, typer.Option("--quick", help="A small sweep (seconds).")] = False,
    repeats: Annotated[int, typer.Option(help="Timed repeats per shape (median kept).")] = 5,
    seed: Annotated[int, typer.Option(help="Seed for the shape list and data.")] = 0,
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
    json_out: JsonOption = False,
) -> None:
    """Time gemm, elementwise, activation, softmax and norm kernels on this machine into a
    measurement file (perfcast's store schema), with the device spec in <out>.device.json."""
    kind = device.strip().lower()
    if kind not in DEVICES:
        raise InputError("device", f"unknown device {device!r}", DEVICES)
    lib = (backend or ("numpy" if kind == "cpu" else "torch")).strip().lower()
    if lib not in BACKENDS:
        raise InputError("backend", f"unknown backend {backend!r}", BACKENDS)
    if kind == "cuda" and lib != "torch":
        raise InputError("backend", "cuda kernels are timed with torch", ["torch"])
    out = _check_out(out, force)
    started = time.perf_counter()
    if kind == "cpu":
        status = (contextlib.nullcontext() if json_out
                  else console.status(f"timing {lib} kernels on one CPU thread..."))
        with status:
            if lib == "torch":
                df = run_torch_cpu_sweep(quick=quick, repeats=repeats, seed=seed)
                spec: Device | None = _with_torch_dispatch(local_cpu_device(threads=1))
            else:
                df = run_cpu_sweep(quick=quick, repeats=repeats, seed=seed)
                spec = local_cpu_device(threads=1)
    else:
        df = run_gpu_sweep(quick=quick, repeats=repeats, seed=seed)
        spec = _gpu_spec(str(df["device"].iloc[0]))
    seconds = time.perf_counter() - started
    _write(df, out)
    device_path = None
    if spec is not None:
        device_path = _device_path(out)
        device_path.write_text(json.dumps(spec.model_dump(mode="json"), indent=2) + "\n")
    if json_out:
        emit_json({"rows": len(df), "path": str(out), "device": str(df["device"].iloc[0]),
                   "device_path": None if device_path is None else str(device_path),
                   "device_spec": None if spec is None else spec.model_dump(mode="json"),
                   "seconds": round(seconds, 3),
                   "summary": _summary(df).to_dict("records")})
    else:
        _print(_summary(df), spec, out, seconds)
