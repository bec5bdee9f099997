"""`perfcast cpu`: scenario X5 on this machine. Calibrate the local CPU with a torch sweep of
the kernels the model launches (the target-measured tier), forecast the eager fp32 forward,
then run the same forward with torch (one thread) and report predicted vs measured, per
kernel family too (each kernel then replayed and timed alone)."""

from __future__ import annotations

import time
from typing import Annotated

import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from perfcast import __version__
from perfcast.cli._common import emit_json, guarded
from perfcast.compose import step_time
from perfcast.errors import InputError, close_matches
from perfcast.kernels import PhysicsModel, add_target_corrections, shipped_calibration
from perfcast.measure import (
    TORCH_OPS,
    local_cpu_device,
    measure_torch_dispatch_s,
    run_torch_cpu_sweep,
)
from perfcast.ops import cnn_ops, eager_ops
from perfcast.specs import Precision, cluster_for, get_model

__all__ = ["CPU_MODELS", "cpu"]

CPU_MODELS: tuple[str, ...] = ("resnet18", "small-transformer")  # small: GPT-2 (124M)
_IMAGE = 224


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


def _torch_models():  # noqa: ANN202 - the module, imported only when torch is there
    try:
        from perfcast.measure import torch_models
    except ImportError:
        raise InputError("torch", "perfcast cpu runs the model with PyTorch, which is not "
                         "installed", "pip install 'perfcast[torch]'") from None
    return torch_models


def _case(tm, model: str, batch: int, seq_len: int) -> tuple[pd.DataFrame, object, tuple]:
    """The op table the forecast prices and the torch model that runs it."""
    if model == "resnet18":
        net, inputs = tm.resnet18_case(batch, _IMAGE)
        return cnn_ops("resnet18", batch, _IMAGE), net, inputs
    net, inputs = tm.gpt2_case(batch, seq_len)
    ops = eager_ops(get_model("gpt2"), batch, seq_len, precision=Precision.uniform("fp32"))
    return ops, net, inputs


def _families(forecast, alone: list[tuple[str, float]]) -> dict[str, dict[str, float]]:
    """Per kernel family: forecast seconds and the family's kernels timed alone."""
    predicted = forecast.ops.groupby("family")["total_s"].sum()
    frame = pd.DataFrame(alone, columns=["op", "seconds"])
    measured = frame.groupby(frame["op"].map(TORCH_OPS))["seconds"].sum()
    out = {}
    for family in sorted(set(predicted.index) | set(measured.index)):
        p, m = float(predicted.get(family, 0.0)), float(measured.get(family, 0.0))
        out[family] = {"predicted_s": p, "measured_alone_s": m,
                       "error": (p - m) / m if m else None}
    return out


def forecast_and_measure(model: str = "resnet18", batch: int = 1, seq_len: int = 128,
                         quick: bool = False, repeats: int | None = None, seed: int = 0) -> dict:
    """X5 end to end: the JSON payload of `perfcast cpu` (see the module docstring)."""
    _check(model, batch, seq_len, repeats)
    tm = _torch_models()
    start = time.perf_counter()
    ops, net, inputs = _case(tm, model, batch, seq_len)
    used = sorted(set(ops["op"].str.split(":").str[0]) & set(TORCH_OPS))
    repeats = repeats or (3 if quick else 5)
    phases = {}
    baseline = tm.reference_s()  # this CPU's speed while the sweep runs
    sweep = run_torch_cpu_sweep(quick=quick, repeats=3 if quick else 5, seed=seed, ops=used)
    phases["sweep_s"] = time.perf_counter() - start
    device = local_cpu_device()
    calibration = add_target_corrections(shipped_calibration(), sweep,
                                         devices={device.name: device})
    forecast = step_time(ops, cluster_for(device, 1), execution="eager",
                         time_model=PhysicsModel(calibration),
                         dispatch_s=measure_torch_dispatch_s())
    phases["forecast_s"] = time.perf_counter() - start - phases["sweep_s"]
    measured = tm.measure_forward_s(net, inputs, baseline, repeats=repeats,
                                    attempts=2 if quick else 5, wait_s=0.5 if quick else 1.5)
    phases["measure_s"] = time.perf_counter() - start - sum(phases.values())
    alone = tm.kernels_alone_s(net, inputs, repeats=1 if quick else 3)
    phases["kernels_alone_s"] = time.perf_counter() - start - sum(phases.values())
    predicted_s, measured_s = forecast.time_s, measured["seconds"]
    return {
        "perfcast_version": __version__, "model": model, "batch": batch,
        "seq_len": seq_len if model != "resnet18" else None, "device": device.name,
        "arch": device.arch, "dtype": "fp32", "threads": 1, "quick": quick, "seed": seed,
        "predicted_s": predicted_s, "measured_s": measured_s,
        "error": (predicted_s - measured_s) / measured_s,
        "measured_quiet": measured["quiet"], "reference_slowdown": measured["slowdown"],
        "sweep_points": len(sweep), "sweep_ops": used, "tier": PhysicsModel(
            calibration).tier(device), "families": _families(forecast, alone),
        "repeats": repeats, "wall_s": time.perf_counter() - start, "phases": phases,
    }


@guarded
def cpu(
    model: Annotated[str, typer.Option(help="resnet18 or small-transformer (GPT-2 124M)")] =
        "resnet18",
    batch: Annotated[int, typer.Option(help="images or sequences per forward")] = 1,
    seq_len: Annotated[int, typer.Option(help="tokens per sequence (small-transformer)")] =
        128,
    quick: Annotated[bool, typer.Option(help="short sweep and fewer retries (~10 s)")] =
        False,
    repeats: Annotated[int | None, typer.Option(help="timed forwards (median); default 5, "
                                                "3 with --quick")] = None,
    seed: Annotated[int, typer.Option(help="sweep shapes and model weights seed")] = 0,
    json_out: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Forecast a model's forward on this CPU (target-measured), then measure it (torch)."""
    out = forecast_and_measure(model, batch, seq_len, quick, repeats, seed)
    if json_out:
        emit_json(out)
        return
    table = Table(title=f"{model} batch {batch} on {out['arch']} (1 thread, fp32): predicted "
                  f"{out['predicted_s'] * 1e3:.2f} ms, measured {out['measured_s'] * 1e3:.2f} "
                  f"ms, error {out['error']:+.1%}")
    for col in ("family", "predicted ms", "kernels alone ms", "error"):
        table.add_column(col, justify="left" if col == "family" else "right")
    for family, row in out["families"].items():
        err = "-" if row["error"] is None else f"{row['error']:+.1%}"
        table.add_row(family, f"{row['predicted_s'] * 1e3:.2f}",
                      f"{row['measured_alone_s'] * 1e3:.2f}", err)
    Console().print(table)
    if not out["measured_quiet"]:
        Console(stderr=True).print(f"note: the CPU was busy while measuring (reference "
                                   f"{out['reference_slowdown']:.2f}x slow)")
