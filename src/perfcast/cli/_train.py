"""`perfcast train`: one training iteration at any scale, the plan search, or an RLHF step."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from perfcast.api import (
    CNNTrainResult,
    RLHFResult,
    TrainRequest,
    TrainResult,
    TrainSweepResult,
)
from perfcast.cli._common import (
    CalibrationMismatchOption,
    CalibrationOption,
    FormatOption,
    GpusPerNicOption,
    JsonOption,
    KernelModelOption,
    NodesPerLeafOption,
    OversubscriptionOption,
    SendrecvGbpsOption,
    SendrecvLatencyOption,
    SharpOption,
    answer,
    guarded,
)
from perfcast.cli._console import (
    Advanced,
    Table,
    calibration_lines,
    in_panel,
    network_line,
    new_console,
)
from perfcast.cli._train_cnn import print_cnn

# Help panels after the model and hardware (typer's "Options"); the advanced ones wait for
# --help-all.
PLAN, BATCH, OUTPUT = "Plan", "Batch", "Output"
DETAILS, MODES, KERNELS = Advanced.PLAN_DETAILS, Advanced.MODES, Advanced.KERNELS
NETWORK = Advanced.NETWORK
KernelModel = in_panel(KernelModelOption, KERNELS)
Calibration = in_panel(CalibrationOption, KERNELS)
CalibrationMismatch = in_panel(CalibrationMismatchOption, KERNELS)
Json = in_panel(JsonOption, OUTPUT)
Format = in_panel(FormatOption, OUTPUT)


@guarded
def train(
    model: Annotated[str | None, typer.Option(
        help="Catalog model or HF id, or a ResNet (resnet18..resnet152: DDP only).")] = None,
    model_config: Annotated[str | None, typer.Option(help="Path to an HF config.json.")] = None,
    gpu: Annotated[str | None, typer.Option(help="Catalog GPU (nodes of 8 built around it).")
                   ] = None,
    cluster: Annotated[str | None, typer.Option(help="Cluster preset instead of --gpu.")] = None,
    num_gpus: Annotated[int | None, typer.Option(help="GPUs (= tp x pp x cp x dp).")] = None,
    dtype: Annotated[str | None, typer.Option(
        help="bf16, fp16, fp32 or fp8 (FP8 GEMMs); default bf16 (fp32 for CNNs).")] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree.", rich_help_panel=PLAN)] = 1,
    pp: Annotated[int, typer.Option(help="Pipeline stages.", rich_help_panel=PLAN)] = 1,
    dp: Annotated[int | None, typer.Option(
        help="Data-parallel degree (default: fills --num-gpus).", rich_help_panel=PLAN)] = None,
    zero: Annotated[int, typer.Option(
        help="ZeRO stage 0-3 (FSDP FULL_SHARD = 3, SHARD_GRAD_OP = 2).",
        rich_help_panel=PLAN)] = 0,
    schedule: Annotated[str, typer.Option(
        help="gpipe, 1f1b or interleaved-1f1b.", rich_help_panel=PLAN)] = "1f1b",
    sweep: Annotated[bool, typer.Option(
        help="Search every plan for --num-gpus; print the fastest that fit.",
        rich_help_panel=PLAN)] = False,
    top: Annotated[int, typer.Option(help="Plans --sweep prints.", rich_help_panel=PLAN)] = 10,
    micro_batch: Annotated[int, typer.Option(
        help="Sequences per micro-batch per DP rank.", rich_help_panel=BATCH)] = 1,
    global_batch: Annotated[int | None, typer.Option(
        help="Sequences per iteration (default: a micro-batch per DP rank).",
        rich_help_panel=BATCH)] = None,
    seq_len: Annotated[int, typer.Option(
        help="Tokens per sequence (RLHF: per prompt).", rich_help_panel=BATCH)] = 2048,
    recompute: Annotated[str, typer.Option(
        help="none, selective or full.", rich_help_panel=BATCH)] = "none",
    json_out: Json = False,
    format_out: Format = None,
    ep: Annotated[int, typer.Option(
        help="Expert-parallel degree (MoE).", rich_help_panel=DETAILS)] = 1,
    expert_skew: Annotated[float, typer.Option(
        help="Most loaded EP rank / mean (MoE).", rich_help_panel=DETAILS)] = 1.0,
    cp: Annotated[int, typer.Option(
        help="Context-parallel degree (ring attention).", rich_help_panel=DETAILS)] = 1,
    cp_algorithm: Annotated[str, typer.Option(
        help="ring or all-to-all (DeepSpeed-Ulysses) context parallelism.",
        rich_help_panel=DETAILS)] = "ring",
    sp: Annotated[bool, typer.Option(
        help="Megatron sequence parallelism (needs --tp > 1).", rich_help_panel=DETAILS)
                  ] = False,
    virtual_stages: Annotated[int, typer.Option(
        help="Model chunks per stage (interleaved-1f1b).", rich_help_panel=DETAILS)] = 1,
    tp_comm_overlap: Annotated[bool, typer.Option(
        "--tp-comm-overlap", help="Pipeline TP collectives with the layer's GEMMs "
        "(Megatron-Core's option; needs --tp > 1).", rich_help_panel=DETAILS)] = False,
    overlap_param_gather: Annotated[bool, typer.Option(
        "--overlap-param-gather", help="Overlap ZeRO-1/2's parameter all-gather with the "
        "next forward (Megatron-Core's option).", rich_help_panel=DETAILS)] = False,
    shard_group: Annotated[int | None, typer.Option(
        help="Hybrid sharding (HSDP): ZeRO/FSDP shards within groups of this many DP ranks, "
             "replicated across the rest (needs --zero >= 1).", rich_help_panel=DETAILS)
                           ] = None,
    lora_rank: Annotated[int | None, typer.Option(
        help="LoRA rank on all linear layers.", rich_help_panel=DETAILS)] = None,
    memory_policy: Annotated[str | None, typer.Option(
        help="Model-state dtypes: amp (16-bit params+grads, fp32 master+Adam: 16 B/param), "
             "amp-distributed (amp, Megatron's distributed optimizer), pure-bf16 (8 B/param), "
             "fp32 (16 B/param) or torch-amp (fp32 under torch.autocast: + its 16-bit weight "
             "copy); default: the stack's (megatron-core: amp).", rich_help_panel=DETAILS)] = None,
    allocator_reserve: Annotated[float, typer.Option(
        help="Fraction of the CUDA-visible memory the caching allocator holds but cannot hand "
             "out (fragmentation); default 0, as with expandable segments (PyTorch's default "
             "allocator: ~0.15 under recomputation/ZeRO, GMLake 2024).",
        rich_help_panel=DETAILS)] = 0.0,
    rank_jitter_cv: Annotated[float, typer.Option(
        help="Per-rank, per-iteration relative std of compute time; the iteration waits for "
             "the slowest GPU (default 0: off).", rich_help_panel=DETAILS)] = 0.0,
    host_s_per_iteration: Annotated[float, typer.Option(
        help="Exposed host seconds per iteration (Python, launches, logging).",
        rich_help_panel=DETAILS)] = 0.0,
    dataloader_s_per_iteration: Annotated[float, typer.Option(
        help="Exposed data-loading seconds per iteration (default 0: prefetched).",
        rich_help_panel=DETAILS)] = 0.0,
    checkpoint_every_iterations: Annotated[int | None, typer.Option(
        help="Checkpoint every N iterations (needs --checkpoint-bandwidth-bps).",
        rich_help_panel=DETAILS)] = None,
    checkpoint_bandwidth_bps: Annotated[float | None, typer.Option(
        help="Aggregate checkpoint write bandwidth, bytes/s.", rich_help_panel=DETAILS)] = None,
    checkpoint_async: Annotated[bool, typer.Option(
        help="Asynchronous checkpoint: only the GPU-to-host copy stalls.",
        rich_help_panel=DETAILS)] = False,
    sendrecv_latency_us: in_panel(SendrecvLatencyOption, NETWORK) = None,
    sendrecv_gbps: in_panel(SendrecvGbpsOption, NETWORK) = None,
    gpus_per_nic: in_panel(GpusPerNicOption, NETWORK) = None,
    sharp: in_panel(SharpOption, NETWORK) = False,
    oversubscription: in_panel(OversubscriptionOption, NETWORK) = 1.0,
    nodes_per_leaf: in_panel(NodesPerLeafOption, NETWORK) = None,
    rlhf: Annotated[bool, typer.Option(
        help="One RLHF PPO step: generation, scoring, actor and critic training.",
        rich_help_panel=MODES)] = False,
    response_tokens: Annotated[int, typer.Option(
        help="RLHF: generated tokens per prompt.", rich_help_panel=MODES)] = 256,
    generation_tp: Annotated[int, typer.Option(
        help="RLHF: GPUs per generation replica.", rich_help_panel=MODES)] = 1,
    allow_oom: Annotated[bool, typer.Option(
        help="Print the forecast of a plan that does not fit in memory (with fits: false and "
             "the memory breakdown) instead of refusing it.", rich_help_panel=MODES)] = False,
    kernel_model: KernelModel = "calibrated",
    calibration: Calibration = None,
    force_calibration: CalibrationMismatch = False,
    stack: Annotated[str | None, typer.Option(
        help="Training software stack (`perfcast stacks`; default megatron-core): its kernel "
             "sources and model-state dtypes; llm-foundry adds kernel-time factors and an overlap "
             "loss fitted on its measured runs (A100, H100).", rich_help_panel=KERNELS)] = None,
    trace_out: Annotated[Path | None, typer.Option(
        help="Write a Chrome-trace/Perfetto JSON of the iteration here (per stage: forward/"
             "backward micro-batches, p2p receives; then gradient reduction, optimizer).",
        rich_help_panel=Advanced.TRACE)] = None,
) -> None:
    """Forecast one training iteration: time, tokens/s, MFU, memory per GPU and where the
    time goes (compute, exposed communication, pipeline bubble, optimizer)."""
    # only a plan search takes seconds, so only --sweep draws a bar
    answer(TrainRequest, locals(), _print,
           progress="train --sweep: plans" if sweep else None)


def _print(result: TrainResult | TrainSweepResult | RLHFResult | CNNTrainResult) -> None:
    """The human tables of whichever question the request asked."""
    if isinstance(result, TrainSweepResult):
        _print_sweep(result)
    elif isinstance(result, RLHFResult):
        _print_rlhf(result)
    elif isinstance(result, CNNTrainResult):
        print_cnn(result)
    else:
        _print_iteration(result)


def _print_iteration(result: TrainResult) -> None:
    i, fc = result.inputs, result.forecast
    title = (f"{i['model']} on {i['num_gpus']}x {i['gpu']} (tp {i['tp']}, pp {i['pp']}, "
             f"dp {i['dp']}, cp {i['cp']}, ep {i['ep']}, ZeRO-{i['zero_stage']}, "
             f"{i['schedule']}, {i['dtype']})")
    t = Table(title=title)
    t.add_column("metric")
    t.add_column("value", justify="right")
    for name, value in (("iteration", f"{fc.iteration_time_s:.3f} s"),
                        *((("iteration P50 / P99", f"{fc.iteration_p50_s:.3f} / "
                            f"{fc.iteration_p99_s:.3f} s"),)
                          if fc.iteration_p99_s != fc.iteration_p50_s else ()),
                        ("tokens/s", f"{fc.tokens_per_s:,.0f}"),
                        ("TFLOP/s per GPU", f"{fc.tflops_per_gpu:.1f}"),
                        ("MFU", f"{fc.mfu:.1%}"), ("HFU", f"{fc.hfu:.1%}"),
                        ("bubble fraction", f"{fc.bubble_fraction:.1%}"),
                        ("memory per GPU", f"{fc.memory_per_gpu_bytes / 1e9:.1f} GB of "
                                           f"{fc.capacity_bytes / 1e9:.0f}")):
        t.add_row(name, value)
    console = new_console()
    console.print(t)
    console.print(_breakdown_table(fc.breakdown))
    console.print(_memory_table(result))
    console.print(f"FLOP convention: {fc.flop_convention}")
    if "network" in i:
        console.print(network_line(i["network"]))
    for note in fc.notes:
        console.print(f"note: {note}", markup=False)
    km = result.payload().get("inputs", {}).get("kernel_model", {})
    for line in calibration_lines(km):
        console.print(line, markup=False)


_NOT_PARTS = {"comm_total_s": "comm_total_s (all collectives; not a part)",
              "hidden_comm_s": "hidden_comm_s (hidden under compute; not a part)"}


def _breakdown_table(breakdown: dict[str, float]) -> Table:
    """The iteration's parts (ITERATION_PARTS, zero scale effects left out), then what they
    include or leave out, labelled so that only the parts add up."""
    from perfcast.train import ITERATION_PARTS, SCALE_PARTS

    b = Table(title="Where the time goes (seconds; parts sum to the iteration)")
    b.add_column("part")
    b.add_column("seconds", justify="right")
    for key in ITERATION_PARTS:
        if breakdown[key] or key not in SCALE_PARTS:
            b.add_row(key, f"{breakdown[key]:.4f}")
        if key == "compute_s":
            b.add_row("  of which recompute_s", f"{breakdown['recompute_s']:.4f}")
        if key == "exposed_comm_s":
            for kind, value in breakdown.items():
                if kind.startswith("exposed_comm.") and value:
                    b.add_row(f"  of which {kind}", f"{value:.4f}")
    for key, label in _NOT_PARTS.items():
        b.add_row(label, f"{breakdown[key]:.4f}")
    return b


def _memory_table(result: TrainResult) -> Table:
    """Bytes per GPU by kind, their total, and what the plan may fill (the MemoryBudget)."""
    fc, budget = result.forecast, result.inputs["memory_budget"]
    m = Table(title=f"Memory per GPU (GB; {result.inputs['memory_policy']} model states)")
    m.add_column("kind")
    m.add_column("GB", justify="right")
    for key, value in fc.memory.items():
        m.add_row(key, f"{value / 1e9:.2f}")
    m.add_row("total", f"{fc.memory_per_gpu_bytes / 1e9:.2f}")
    m.add_row(f"usable (CUDA-visible less {budget['allocator_reserve']:.0%} allocator reserve)",
              f"{budget['budget_bytes'] / 1e9:.2f}")
    m.add_row("physical", f"{budget['physical_bytes'] / 1e9:.2f}")
    return m


def _print_rlhf(result: RLHFResult) -> None:
    i, step = result.inputs, result.step
    t = Table(title=f"RLHF PPO step: {i['model']} on {i['num_gpus']}x {i['gpu']} "
              f"({i['global_batch']} prompts of {i['seq_len']} + {i['response_tokens']} tokens)")
    t.add_column("phase")
    t.add_column("seconds", justify="right")
    t.add_column("share", justify="right")
    for key in ("generation_s", "scoring_s", "actor_train_s", "critic_train_s", "step_s"):
        seconds = getattr(step, key)
        t.add_row(key.removesuffix("_s"), f"{seconds:.3f}", f"{seconds / step.step_s:.1%}")
    new_console().print(t)


def _print_sweep(result: TrainSweepResult) -> None:
    inputs, table, fitting = result.inputs, result.plans, result.fitting
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
    console = new_console()
    console.print(t)
    if "network" in inputs:
        console.print(network_line(inputs["network"]))
