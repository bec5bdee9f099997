"""`perfcast step`: one forward or training iteration of a model, as eager PyTorch runs it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from perfcast import __version__
from perfcast.api._choices import kernel_model
from perfcast.cli._common import (
    CalibrationOption,
    JsonOption,
    KernelModelOption,
    emit_json,
    guarded,
)
from perfcast.compose import (
    Execution,
    chrome_trace,
    data_parallel_step,
    pipeline_step,
    step_time,
    step_timeline,
)
from perfcast.errors import InputError
from perfcast.ops import EAGER_MODES, eager_ops
from perfcast.specs import (
    ParallelPlan,
    Precision,
    bytes_per_element,
    cluster_for,
    get_device,
    get_model,
    parse_dtype,
)

console = Console()


def _layout(num_gpus: int | None, tp: int, pp: int, dp: int) -> int:
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


@guarded
def step(
    model: Annotated[str | None, typer.Option(help="Catalog model name or HF id.")] = None,
    model_config: Annotated[str | None, typer.Option(help="Path to an HF config.json.")] = None,
    gpu: Annotated[str, typer.Option(help="Catalog GPU name (see `hardware list`).")] = (
        "a100-sxm4-80gb"),
    batch: Annotated[int, typer.Option(help="Sequences in the batch (global, across dp).")] = 1,
    seq_len: Annotated[int, typer.Option(help="Tokens per sequence.")] = 512,
    mode: Annotated[str, typer.Option(help="forward or training (forward + backward).")] = (
        "forward"),
    dtype: Annotated[str, typer.Option(help="Weights, activations and math dtype.")] = "fp32",
    execution: Annotated[Execution, typer.Option(help="Kernel launch mode.")] = Execution.EAGER,
    fused: Annotated[bool, typer.Option(help="Apply the fusion rules (torch.compile-style).")
                     ] = False,
    recompute: Annotated[bool, typer.Option(help="Full activation recompute (training).")
                         ] = False,
    optimizer: Annotated[str | None, typer.Option(
        help="Add the optimizer step (training): adam or sgd.")] = None,
    num_gpus: Annotated[int | None, typer.Option(help="GPUs (= tp x pp x dp).")] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree.")] = 1,
    pp: Annotated[int, typer.Option(help="Pipeline stages (one micro-batch).")] = 1,
    dp: Annotated[int, typer.Option(help="Data-parallel replicas (DDP).")] = 1,
    kernel_model_name: KernelModelOption = "calibrated",
    calibration: CalibrationOption = None,
    trace: Annotated[Path | None, typer.Option(
        help="Write a Chrome-trace/Perfetto JSON of the step here.")] = None,
    json_out: JsonOption = False,
) -> None:
    """Forecast one iteration: time, 90% interval and where the time goes."""
    if mode not in EAGER_MODES:
        raise InputError("mode", f"unknown mode {mode!r}", list(EAGER_MODES))
    gpus = _layout(num_gpus, tp, pp, dp)
    if batch % dp:
        raise InputError("batch", f"{batch} sequences do not split over dp={dp}",
                         f"a multiple of {dp}")
    if trace is not None and trace.exists():
        raise InputError("trace", f"{trace} exists; perfcast never overwrites a file",
                         "a new path")
    spec = get_model(model, model_config)
    dt = parse_dtype(dtype, "dtype")
    precision = Precision.uniform(dt)
    cluster = cluster_for(get_device(gpu), gpus)
    time_model, info = kernel_model(kernel_model_name, calibration, cluster.device)
    ops = eager_ops(spec, batch // dp, seq_len, mode, precision, ParallelPlan(tp=tp), fused,
                    recompute, optimizer)
    one = step_time(ops, cluster, execution, time_model=time_model)
    total, comm = one.time_s, 0.0
    if dp > 1:
        par = data_parallel_step(one, 4.0 * spec.total_params() / tp, cluster, dp)
        total, comm = par.time_s, par.exposed_comm_s
    elif pp > 1:
        act = bytes_per_element(dt) * batch * seq_len * spec.hidden_size
        par = pipeline_step(one, act, cluster, pp)
        total, comm = par.time_s, par.exposed_comm_s
    low, high = one.interval_s or (one.time_s, one.time_s)
    payload = {
        "perfcast_version": __version__,
        "inputs": {"model": spec.name, "gpu": cluster.device.name, "num_gpus": gpus,
                   "tp": tp, "pp": pp, "dp": dp, "batch": batch, "seq_len": seq_len,
                   "mode": mode, "dtype": dt.value, "execution": str(execution),
                   "fused": fused, "recompute": recompute, "optimizer": optimizer,
                   "kernel_model": info},
        "time_s": total, "interval_s": {"low": low + total - one.time_s,
                                        "high": high + total - one.time_s, "level": 0.9},
        "breakdown": {**one.breakdown(), **_phases(one), "exposed_parallel_comm_s": comm},
        "kernels": int(ops["count"].sum()),
    }
    if trace is not None:
        trace.write_text(json.dumps(chrome_trace(step_timeline(one, execution))))
        payload["trace"] = str(trace)
    if json_out:
        emit_json(payload)
    else:
        _print(payload, one)


def _phases(step) -> dict[str, float]:
    """Seconds of kernels per phase (forward, recompute, backward, optimizer)."""
    g = step.ops.groupby("phase", sort=False)["total_s"].sum()
    return {f"phase.{k}": float(v) for k, v in g.items()}


def _print(payload: dict, one) -> None:
    i = payload["inputs"]
    tier = i["kernel_model"].get("tier", i["kernel_model"]["name"])
    t = Table(title=f"{i['model']} {i['mode']} on {i['num_gpus']}x {i['gpu']} "
              f"(batch {i['batch']} x {i['seq_len']}, {i['execution']}, kernels: {tier})")
    t.add_column("metric")
    t.add_column("value", justify="right")
    iv = payload["interval_s"]
    t.add_row("step time", f"{payload['time_s'] * 1e3:.2f} ms")
    t.add_row("90% interval", f"{iv['low'] * 1e3:.2f} - {iv['high'] * 1e3:.2f} ms")
    t.add_row("kernel launches", f"{payload['kernels']:,}")
    console.print(t)
    b = Table(title="Where the time goes")
    for col in ("family", "seconds", "share"):
        b.add_column(col, justify="left" if col == "family" else "right")
    for row in one.by("family").itertuples():
        b.add_row(str(row.family), f"{row.total_s:.6f}", f"{row.share:.1%}")
    console.print(b)
