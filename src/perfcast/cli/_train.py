"""`perfcast train`: one training iteration at any scale, the plan search, or an RLHF step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from perfcast import __version__
from perfcast.api._choices import kernel_model, machines_for
from perfcast.cli._common import (
    CalibrationOption,
    JsonOption,
    KernelModelOption,
    emit_json,
    guarded,
)
from perfcast.cli._train_cnn import train_cnn
from perfcast.errors import InputError
from perfcast.ops import CNN_MODELS
from perfcast.specs import (
    Cluster,
    ParallelPlan,
    PipelineSchedule,
    get_model,
    parse_dtype,
)
from perfcast.train import (
    RECOMPUTE,
    TrainForecast,
    TrainJob,
    forecast_training,
    rlhf_step,
    stack_time_model,
    sweep_plans,
    training_precision,
)

console = Console()
_FIT_HINT = ("a higher --zero, more --tp/--pp/--cp, --sp, --recompute full or a smaller "
             "--micro-batch")


def _layout(num_gpus: int | None, tp: int, pp: int, dp: int | None, cp: int) -> tuple[int, int]:
    """(dp, GPUs): dp defaults to what fills --num-gpus."""
    for name, value in (("tp", tp), ("pp", pp), ("cp", cp), ("dp", dp or 1)):
        if value < 1:
            raise InputError(name, f"must be >= 1, got {value}", ">= 1")
    model_parallel = tp * pp * cp
    if dp is None:
        if num_gpus is None:
            return 1, model_parallel
        if num_gpus % model_parallel:
            raise InputError("num_gpus", f"{num_gpus} GPUs do not split into tp x pp x cp = "
                             f"{model_parallel}", f"a multiple of {model_parallel}")
        return num_gpus // model_parallel, num_gpus
    if num_gpus is not None and num_gpus != model_parallel * dp:
        raise InputError("num_gpus", f"{num_gpus} GPUs but tp x pp x cp x dp = "
                         f"{model_parallel * dp}", str(model_parallel * dp))
    return dp, model_parallel * dp


def _schedule(name: str) -> PipelineSchedule:
    try:
        return PipelineSchedule(name)
    except ValueError:
        raise InputError("schedule", f"unknown schedule {name!r}",
                         [s.value for s in PipelineSchedule]) from None


@guarded
def train(
    model: Annotated[str | None, typer.Option(
        help="Catalog model name or HF id, or a ResNet (resnet18..resnet152: DDP only).")
                     ] = None,
    model_config: Annotated[str | None, typer.Option(help="Path to an HF config.json.")] = None,
    gpu: Annotated[str | None, typer.Option(help="Catalog GPU (nodes of 8 built around it).")
                   ] = None,
    cluster: Annotated[str | None, typer.Option(help="Cluster preset instead of --gpu.")] = None,
    num_gpus: Annotated[int | None, typer.Option(help="GPUs (= tp x pp x cp x dp).")] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree.")] = 1,
    pp: Annotated[int, typer.Option(help="Pipeline stages.")] = 1,
    dp: Annotated[int | None, typer.Option(help="Data-parallel degree (default: fills "
                                           "--num-gpus).")] = None,
    ep: Annotated[int, typer.Option(help="Expert-parallel degree (MoE).")] = 1,
    cp: Annotated[int, typer.Option(help="Context-parallel degree (ring attention).")] = 1,
    sp: Annotated[bool, typer.Option(help="Megatron sequence parallelism (needs --tp > 1).")
                  ] = False,
    zero: Annotated[int, typer.Option(help="ZeRO stage 0-3 (FSDP FULL_SHARD = 3, "
                                      "SHARD_GRAD_OP = 2).")] = 0,
    schedule: Annotated[str, typer.Option(help="gpipe, 1f1b or interleaved-1f1b.")] = "1f1b",
    virtual_stages: Annotated[int, typer.Option(help="Model chunks per stage "
                                                "(interleaved-1f1b).")] = 1,
    micro_batch: Annotated[int, typer.Option(help="Sequences per micro-batch per DP rank.")
                           ] = 1,
    global_batch: Annotated[int | None, typer.Option(
        help="Sequences per iteration, all DP ranks (default: one micro-batch per rank).")
    ] = None,
    seq_len: Annotated[int, typer.Option(help="Tokens per sequence (RLHF: per prompt).")
                       ] = 2048,
    recompute: Annotated[str, typer.Option(help="none, selective or full.")] = "none",
    dtype: Annotated[str | None, typer.Option(
        help="bf16, fp16, fp32 or fp8 (FP8 GEMMs); default bf16 (fp32 for CNNs).")] = None,
    lora_rank: Annotated[int | None, typer.Option(help="LoRA rank on all linear layers.")
                         ] = None,
    expert_skew: Annotated[float, typer.Option(help="Most loaded EP rank / mean (MoE).")
                           ] = 1.0,
    sweep: Annotated[bool, typer.Option(help="Search every plan for --num-gpus; print the "
                                        "fastest that fit.")] = False,
    top: Annotated[int, typer.Option(help="Plans to print with --sweep.")] = 10,
    rlhf: Annotated[bool, typer.Option(help="One RLHF PPO step: generation, scoring, actor "
                                       "and critic training.")] = False,
    response_tokens: Annotated[int, typer.Option(help="RLHF: generated tokens per prompt.")
                               ] = 256,
    generation_tp: Annotated[int, typer.Option(help="RLHF: GPUs per generation replica.")
                             ] = 1,
    kernel_model_name: KernelModelOption = "calibrated",
    calibration: CalibrationOption = None,
    stack: Annotated[str, typer.Option(
        help="Training software stack: none (the calibrated kernels as benchmarked) or "
             "llm-foundry (MosaicML's PyTorch FSDP stack: kernel-time factors fitted on its "
             "measured runs, A100/Ampere and H100/Hopper).")] = "none",
    allow_oom: Annotated[bool, typer.Option(
        help="Print the forecast of a plan that does not fit in memory (with fits: false and "
             "the memory breakdown) instead of refusing it.")] = False,
    trace_out: Annotated[Path | None, typer.Option(
        help="Write a Chrome-trace/Perfetto JSON of the iteration here (per stage: forward/"
             "backward micro-batches, p2p receives; then gradient reduction, optimizer).")
    ] = None,
    json_out: JsonOption = False,
) -> None:
    """Forecast one training iteration: time, tokens/s, MFU, memory per GPU and where the
    time goes (compute, exposed communication per kind, pipeline bubble, optimizer)."""
    _check_trace_out(trace_out, sweep or rlhf or model in CNN_MODELS)
    if recompute not in RECOMPUTE:
        raise InputError("recompute", f"unknown {recompute!r}", RECOMPUTE)
    dp_degree, gpus = _layout(num_gpus, tp, pp, dp, cp)
    gpus = num_gpus or gpus
    machines = machines_for(gpu, cluster, gpus)
    time_model, info = kernel_model(kernel_model_name, calibration, machines.device)
    if model in CNN_MODELS:
        only = {"tp": (tp, 1), "pp": (pp, 1), "cp": (cp, 1), "ep": (ep, 1), "sp": (sp, False),
                "zero": (zero, 0), "recompute": (recompute, "none"), "lora_rank": (lora_rank,
                None), "sweep": (sweep, False), "rlhf": (rlhf, False), "stack": (stack, "none"),
                "allow_oom": (allow_oom, False)}
        train_cnn(model, machines, gpus, micro_batch, global_batch, dtype or "fp32",
                  time_model, info, only, json_out)
        return
    dtype = dtype or "bf16"
    spec = get_model(model, model_config)
    precision = training_precision(parse_dtype(dtype, "dtype"))
    if stack != "none" and (kernel_model_name != "calibrated" or rlhf):
        raise InputError("stack", "a stack profile scales the calibrated kernel model of a "
                         "training forecast", "--stack none, or --kernel-model calibrated "
                         "without --rlhf")
    time_model = stack_time_model(stack, machines.device, time_model)
    info["stack"] = stack
    batch = global_batch or micro_batch * dp_degree
    inputs = {"model": spec.name, "gpu": machines.device.name, "num_gpus": gpus,
              "seq_len": seq_len, "global_batch": batch, "dtype": dtype,
              "kernel_model": info}
    if sweep:
        table = sweep_plans(spec, machines, seq_len=seq_len, global_batch=batch, num_gpus=gpus,
                            precision=precision, lora_rank=lora_rank, expert_skew=expert_skew,
                            time_model=time_model)
        _print_sweep(table, inputs, top, json_out)
        return
    plan = ParallelPlan(tp=tp, pp=pp, dp=dp_degree, ep=ep, cp=cp, sp=sp, zero_stage=zero,
                        schedule=_schedule(schedule), virtual_stages=virtual_stages,
                        expert_skew=expert_skew)
    inputs.update(plan.model_dump(mode="json"), micro_batch=micro_batch, recompute=recompute,
                  lora_rank=lora_rank)
    if rlhf:
        step = rlhf_step(spec, machines, prompts=batch, prompt_tokens=seq_len,
                         response_tokens=response_tokens, plan=plan, micro_batch=micro_batch,
                         generation_tp=generation_tp, precision=precision,
                         recompute=recompute, time_model=time_model)
        inputs.update(response_tokens=response_tokens, generation_tp=generation_tp)
        _check_fits(step.actor, machines, allow_oom)
        _emit({"perfcast_version": __version__, "inputs": inputs, **step.as_dict()},
              json_out, _print_rlhf)
        return
    job = TrainJob(model=spec, cluster=machines, plan=plan, seq_len=seq_len,
                   micro_batch=micro_batch, global_batch=batch, precision=precision,
                   recompute=recompute, lora_rank=lora_rank)
    fc = forecast_training(job, time_model=time_model)
    _check_fits(fc, machines, allow_oom)
    if trace_out is not None:
        from perfcast.report import training_schedule, training_trace

        trace = training_trace(training_schedule(job, time_model=time_model, forecast=fc))
        trace_out.write_text(json.dumps(trace))
    _emit({"perfcast_version": __version__, "inputs": inputs, **fc.as_dict()}, json_out,
          lambda payload: _print(payload, fc))


def _check_trace_out(trace_out: Path | None, other_mode: bool) -> None:
    """--trace-out traces one LLM training iteration, into a new file."""
    if trace_out is None:
        return
    if other_mode:
        raise InputError("trace_out", "traces one LLM training iteration", "omit it with "
                         "--sweep, --rlhf or a CNN model")
    if trace_out.exists():
        raise InputError("trace_out", f"{trace_out} exists; refusing to overwrite it",
                         "a new path")


def _check_fits(fc: TrainForecast, machines: Cluster, allow_oom: bool) -> None:
    """The CLI refuses a plan whose memory per GPU exceeds the device's unless told to print
    it anyway (the API returns it with fits=False)."""
    if not fc.fits and not allow_oom:
        raise InputError("memory", f"needs {fc.memory_per_gpu_bytes / 1e9:.1f} GB per GPU ("
                         + ", ".join(f"{k} {v / 1e9:.1f}" for k, v in fc.memory.items())
                         + f") but {machines.device.name} has {fc.capacity_bytes / 1e9:.1f} GB",
                         _FIT_HINT)


def _emit(payload: dict, json_out: bool, printer) -> None:
    if json_out:
        emit_json(payload)
    else:
        printer(payload)


def _print(payload: dict, fc: TrainForecast) -> None:
    i = payload["inputs"]
    title = (f"{i['model']} on {i['num_gpus']}x {i['gpu']} (tp {i['tp']}, pp {i['pp']}, "
             f"dp {i['dp']}, cp {i['cp']}, ep {i['ep']}, ZeRO-{i['zero_stage']}, "
             f"{i['schedule']}, {i['dtype']})")
    t = Table(title=title)
    t.add_column("metric")
    t.add_column("value", justify="right")
    for name, value in (("iteration", f"{fc.iteration_time_s:.3f} s"),
                        ("tokens/s", f"{fc.tokens_per_s:,.0f}"),
                        ("TFLOP/s per GPU", f"{fc.tflops_per_gpu:.1f}"),
                        ("MFU", f"{fc.mfu:.1%}"), ("HFU", f"{fc.hfu:.1%}"),
                        ("bubble fraction", f"{fc.bubble_fraction:.1%}"),
                        ("memory per GPU", f"{fc.memory_per_gpu_bytes / 1e9:.1f} GB of "
                                           f"{fc.capacity_bytes / 1e9:.0f}")):
        t.add_row(name, value)
    console.print(t)
    b = Table(title="Where the time goes (seconds; parts sum to the iteration)")
    b.add_column("part")
    b.add_column("seconds", justify="right")
    for key, value in fc.breakdown.items():
        if value or not key.startswith("exposed_comm."):
            b.add_row(key, f"{value:.4f}")
    console.print(b)
    m = Table(title="Memory per GPU (GB)")
    m.add_column("kind")
    m.add_column("GB", justify="right")
    for key, value in fc.memory.items():
        m.add_row(key, f"{value / 1e9:.2f}")
    console.print(m)
    console.print(f"FLOP convention: {fc.flop_convention}")


def _print_rlhf(payload: dict) -> None:
    i = payload["inputs"]
    t = Table(title=f"RLHF PPO step: {i['model']} on {i['num_gpus']}x {i['gpu']} "
              f"({i['global_batch']} prompts of {i['seq_len']} + {i['response_tokens']} tokens)")
    t.add_column("phase")
    t.add_column("seconds", justify="right")
    t.add_column("share", justify="right")
    for key in ("generation_s", "scoring_s", "actor_train_s", "critic_train_s", "step_s"):
        t.add_row(key.removesuffix("_s"), f"{payload[key]:.3f}",
                  f"{payload[key] / payload['step_s']:.1%}")
    console.print(t)


def _print_sweep(table, inputs: dict, top: int, json_out: bool) -> None:
    fitting = table[table["fits"]].head(top)
    if json_out:
        emit_json({"perfcast_version": __version__, "inputs": inputs,
                   "plans_searched": len(table), "plans_fitting": int(table["fits"].sum()),
                   "top": fitting.to_dict("records")})
        return
    t = Table(title=f"{inputs['model']} on {inputs['num_gpus']}x {inputs['gpu']}: fastest of "
              f"{len(table):,} plans ({int(table['fits'].sum()):,} fit)")
    for col in ("plan", "tokens/s", "MFU", "GB/GPU"):
        t.add_column(col, justify="left" if col == "plan" else "right")
    for row in fitting.itertuples(index=False):
        sched = row.schedule + (f" v{row.virtual_stages}" if row.virtual_stages > 1 else "")
        plan = (f"tp{row.tp}{'+sp' if row.sp else ''} pp{row.pp} dp{row.dp} cp{row.cp}"
                f"{f' ep{row.ep}' if row.ep > 1 else ''} zero{row.zero_stage} "
                f"mb{row.micro_batch} {sched} rc:{row.recompute}")
        t.add_row(plan, f"{row.tokens_per_s:,.0f}", f"{row.mfu:.1%}",
                  f"{row.memory_per_gpu_bytes / 1e9:.1f}")
    console.print(t)
