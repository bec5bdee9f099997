"""`perfcast infer`: one request (or a static batch) on one GPU or a TP group."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from perfcast import __version__
from perfcast.cli._common import (
    CalibrationOption,
    HostOption,
    JsonOption,
    KernelModelOption,
    emit_json,
    guarded,
    machines_for,
)
from perfcast.compose import Execution, InferenceForecast, forecast_inference
from perfcast.errors import InputError
from perfcast.kernels import Calibration, PhysicsModel, RooflineModel, shipped_calibration
from perfcast.specs import (
    Device,
    ParallelPlan,
    Precision,
    get_model,
    parse_dtype,
)

console = Console()


def _plan(tp: int | None, num_gpus: int | None, cp: int = 1) -> ParallelPlan:
    if cp < 1:
        raise InputError("cp", f"must be >= 1, got {cp}", ">= 1")
    tp = tp or (num_gpus // cp if num_gpus else 1) or 1
    if num_gpus is not None and num_gpus != tp * cp:
        raise InputError("num_gpus", f"{num_gpus} GPUs with tp={tp}, cp={cp}: one request "
                         "runs on one TP x CP group", str(tp * cp))
    if tp < 1:
        raise InputError("tp", f"must be >= 1, got {tp}", ">= 1")
    return ParallelPlan(tp=tp, cp=cp)


ACTIVATION_QUANT = ("separate", "fused")


def _precision(dtype: str, kv_dtype: str | None, weight_dtype: str | None,
               activation_quant: str = "separate") -> Precision:
    if activation_quant not in ACTIVATION_QUANT:
        raise InputError("activation_quant", f"unknown {activation_quant!r}", ACTIVATION_QUANT)
    act = parse_dtype(dtype, "dtype")
    weights = parse_dtype(weight_dtype, "weight_dtype") if weight_dtype else act
    kv = parse_dtype(kv_dtype, "kv_dtype") if kv_dtype else (act if act.value in (
        "fp16", "bf16", "fp32", "fp8") else parse_dtype("bf16"))
    return Precision(weights=weights, activations=act, kv_cache=kv,
                     activation_quant=activation_quant)


KERNEL_MODELS = ("calibrated", "roofline")


def kernel_model(name: str, calibration: str | None, device: Device | None = None):
    """The kernel time model a command forecasts with, and a description of it (with the
    calibration tier it prices `device` in, when one is given)."""
    if name not in KERNEL_MODELS:
        raise InputError("kernel_model", f"unknown model {name!r}", KERNEL_MODELS)
    if name == "roofline":
        if calibration:
            raise InputError("calibration", "only applies to --kernel-model calibrated",
                             "omit --calibration")
        return RooflineModel(), {"name": "roofline"}
    cal = shipped_calibration()
    if calibration:
        cal = cal.merged_with(Calibration.load(calibration))
    model = PhysicsModel(cal)
    info = {"name": "calibrated", "calibration": calibration or "shipped"}
    if device is not None:
        info["tier"] = model.tier(device)
    return model, info


def _payload(f: InferenceForecast, inputs: dict) -> dict:
    decode = f.decode.breakdown() if f.decode is not None else None
    return {
        "perfcast_version": __version__, "inputs": inputs,
        "ttft_s": f.ttft_s, "tpot_s": f.tpot_s, "e2e_s": f.e2e_s,
        "throughput_tok_s": f.throughput_tok_s,
        "vision_encode_s": f.vision_encode_s, "image_tokens": f.image_tokens,
        "context_parallel": (f.context_parallel.as_dict() if f.context_parallel is not None
                             else None),
        "interval_s": {k: None if v is None else {"low": v[0], "high": v[1], "level": 0.9}
                       for k, v in f.intervals_s().items()},
        "memory_bytes": f.memory.as_dict(),
        "breakdown": {"prefill": f.prefill.breakdown(), "decode_step": decode,
                      "vision_encode": f.vision.breakdown() if f.vision is not None else None,
                      "by_family": f.breakdown().to_dict("records")},
        "notes": f.notes,
    }


def _print(f: InferenceForecast, inputs: dict) -> None:
    km = inputs["kernel_model"]
    tier = f", {km['tier']} tier" if "tier" in km else ""
    gpus = inputs["tp"] * inputs["cp"]
    cp = f", tp={inputs['tp']} cp={inputs['cp']}" if inputs["cp"] > 1 else ""
    summary = Table(title=f"{inputs['model']} on {gpus}x {inputs['gpu']}{cp} "
                    f"(kernels: {km['name']}{tier})")
    summary.add_column("metric")
    summary.add_column("value", justify="right")
    tpot = "-" if f.tpot_s is None else f"{f.tpot_s * 1e3:.3f} ms"
    for name, value in (("TTFT", f"{f.ttft_s * 1e3:.3f} ms"), ("TPOT", tpot),
                        ("end-to-end", f"{f.e2e_s * 1e3:.1f} ms"),
                        ("throughput", f"{f.throughput_tok_s:,.1f} tok/s")):
        summary.add_row(name, value)
    if f.vision is not None:
        summary.add_row("  of TTFT: vision encode", f"{f.vision_encode_s * 1e3:.3f} ms")
        summary.add_row("image tokens", f"{f.image_tokens:,}")
    if f.context_parallel is not None:
        c = f.context_parallel
        summary.add_row("CP prompt tokens per GPU", f"{c.tokens_per_rank:,}")
        summary.add_row("CP KV ring sent per GPU", f"{c.kv_ring_bytes / 1e9:.2f} GB")
        summary.add_row("CP KV ring time (exposed)",
                        f"{c.ring_s * 1e3:.3f} ms ({c.ring_exposed_s * 1e3:.3f} ms)")
        summary.add_row("CP decode combine per step", f"{c.decode_combine_s * 1e3:.3f} ms")
    for key, value in f.memory.as_dict().items():
        summary.add_row(f"memory per GPU {key.removesuffix('_bytes')}", f"{value / 1e9:.2f} GB")
    console.print(summary)
    table = Table(title="Where the time goes")
    for col in ("phase", "family", "seconds", "share"):
        table.add_column(col, justify="right" if col in ("seconds", "share") else "left")
    for row in f.breakdown().itertuples():
        table.add_row(row.phase, row.family, f"{row.total_s:.6f}", f"{row.share:.1%}")
    console.print(table)
    for note in f.notes:
        console.print(f"note: {note}")


@guarded
def infer(
    model: Annotated[str | None, typer.Option(help="Catalog model name or HF id.")] = None,
    model_config: Annotated[str | None, typer.Option(help="Path to an HF config.json.")] = None,
    gpu: Annotated[str | None, typer.Option(help="Catalog GPU name (see `hardware list`).")] = None,
    cluster: Annotated[str | None, typer.Option(help="Cluster preset instead of --gpu.")] = None,
    tp: Annotated[int | None, typer.Option(help="Tensor-parallel degree.")] = None,
    num_gpus: Annotated[int | None, typer.Option(help="GPUs (= tp x cp for one request).")] = (
        None),
    cp: Annotated[int, typer.Option(help="Context-parallel degree: the prompt split over cp "
                                    "GPUs (ring attention prefill, sharded-KV decode).")] = 1,
    images: Annotated[int, typer.Option(help="Images per request (multimodal models: each "
                                        "adds its vision tokens and encoding time).")] = 0,
    prompt_tokens: Annotated[int, typer.Option(help="Prompt length per request.")] = 512,
    output_tokens: Annotated[int, typer.Option(help="Generated tokens per request.")] = 128,
    batch: Annotated[int, typer.Option(help="Requests run together (static batch).")] = 1,
    dtype: Annotated[str, typer.Option(help="Activation (and default weight) dtype.")] = "bf16",
    weight_dtype: Annotated[str | None, typer.Option(help="Weights, e.g. int4 for W4A16.")] = None,
    kv_dtype: Annotated[str | None, typer.Option(help="KV-cache dtype (default: --dtype).")] = None,
    execution: Annotated[Execution, typer.Option(help="Kernel launch mode.")] = (
        Execution.CUDA_GRAPH),
    host: HostOption = "vllm-v0",
    kernel_model_name: KernelModelOption = "calibrated",
    calibration: CalibrationOption = None,
    json_out: JsonOption = False,
) -> None:
    """Forecast TTFT, TPOT, end-to-end latency and memory of one request or a static batch."""
    spec = get_model(model, model_config)
    plan = _plan(tp, num_gpus, cp)
    box = machines_for(gpu, cluster, plan.tp * plan.cp)
    precision = _precision(dtype, kv_dtype, weight_dtype)
    model_obj, model_info = kernel_model(kernel_model_name, calibration, box.device)
    forecast = forecast_inference(
        spec, box, batch=batch, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
        precision=precision, plan=plan, execution=execution, host=host, time_model=model_obj,
        images=images)
    inputs = {"model": spec.name, "gpu": box.device.name, "cluster": box.name, "tp": plan.tp,
              "cp": plan.cp, "images": images,
              "batch": batch, "prompt_tokens": prompt_tokens, "output_tokens": output_tokens,
              "precision": precision.model_dump(mode="json"), "execution": str(execution),
              "host": host, "kernel_model": model_info}
    if json_out:
        emit_json(_payload(forecast, inputs))
    else:
        _print(forecast, inputs)
