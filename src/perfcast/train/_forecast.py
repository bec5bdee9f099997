"""`forecast_training`: one training iteration of a TrainJob, with its breakdown."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import resources

import numpy as np

from perfcast.comm import CollectiveModel, default_collective_model
from perfcast.compose import EagerGraph
from perfcast.kernels import ExecutionTimeModel, default_time_model
from perfcast.train._engine import EXPOSED_KINDS, evaluate
from perfcast.train._flops import hardware_flops, model_flops
from perfcast.train._job import TrainJob
from perfcast.train._memory import MEMORY_KINDS
from perfcast.train._overlap import OVERLAP_PARTS
from perfcast.train._scale import SCALE_PARTS, trainable_params

__all__ = ["FLOP_CONVENTION", "ITERATION_PARTS", "TrainForecast", "default_time_model",
           "forecast_training", "forecasts_from_columns", "iteration_parts", "mfu_ceiling",
           "mfu_reference", "model_class"]

FLOP_CONVENTION = (
    "model FLOPs = 6 N T + 3 x attention forward (PaLM/Megatron-LM: N = matmul parameters "
    "incl. the LM head, attention counted over the full s x s scores, no causal halving); "
    "LoRA: 4 N_base + 6 N_adapter; recomputation excluded (hardware FLOPs/HFU include it)")

# breakdown keys that sum to iteration_time_s (TrainForecast)
ITERATION_PARTS = ("compute_s", "bubble_s", "optimizer_s", "exposed_comm_s", *OVERLAP_PARTS,
                   *SCALE_PARTS)


def iteration_parts(breakdown: Mapping[str, float]) -> dict[str, float]:
    """ITERATION_PARTS of a training breakdown (a TrainForecast's or its JSON's) at the
    finest grain that still sums to the iteration: compute_s less recompute_s, recompute_s,
    each exposed_comm.<kind>_s in place of exposed_comm_s, then the rest in order."""
    parts = {"compute_s": breakdown["compute_s"] - breakdown["recompute_s"],
             "recompute_s": breakdown["recompute_s"]}
    for key in ITERATION_PARTS[1:]:
        if key == "exposed_comm_s":
            parts.update({k: v for k, v in breakdown.items() if k.startswith("exposed_comm.")})
        else:
            parts[key] = breakdown[key]
    return parts


@dataclass(frozen=True)
class TrainForecast:
    """One training iteration. `breakdown`'s ITERATION_PARTS — compute_s + bubble_s +
    optimizer_s + exposed_comm_s (the sum of its exposed_comm.<kind>_s) + contention_s +
    overlap_loss_s (what hiding hidden_comm_s of collectives under compute costs,
    perfcast.train._overlap) + straggler_s + host_s + checkpoint_s (the scale effects,
    perfcast.train._scale; 0 unless set) — equal iteration_time_s, the expected iteration,
    which tokens_per_s, MFU and HFU use;
    iteration_p50_s and iteration_p99_s are percentiles over iterations of the slowest
    rank's time (both the iteration when no scale effect is set);
    recompute_s is the part of compute_s that recomputation adds and comm_total_s every
    collective's full time on the busiest stage, overlapped or not (`comm` per kind; the
    exposed p2p time is the makespan the sends add, which can exceed one stage's own sends
    when they chain across stages). `memory` is the fullest
    stage's bytes per GPU by kind; `fits` compares their sum with `capacity_bytes`, what
    the job's MemoryBudget lets a plan fill (CUDA-visible bytes less the allocator reserve).
    `notes` name what a reader should know: a plan that does not fit, an MFU above the best
    published for the model's class (perfcast.train._mfu_reference)."""

    iteration_time_s: float
    iteration_p50_s: float
    iteration_p99_s: float
    tokens_per_s: float
    tflops_per_gpu: float
    mfu: float
    hfu: float
    model_flops: float
    hardware_flops: float
    memory_per_gpu_bytes: float
    capacity_bytes: float
    fits: bool
    memory: dict[str, float]
    breakdown: dict[str, float]
    comm: dict[str, float]
    bubble_fraction: float
    gradient_bytes: float
    num_gpus: int
    micro_batches: int
    trainable_params: float
    flop_convention: str = FLOP_CONVENTION
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        """JSON-ready: plain floats, ints, bools, strings, dicts and lists."""
        return asdict(self)


@cache
def mfu_reference() -> tuple[dict, ...]:
    """The shipped best published MFU per model class x GPU architecture x dtype
    (data/mfu_reference.json, each row with its source): a sanity ceiling, never fitted."""
    path = resources.files("perfcast.train") / "data" / "mfu_reference.json"
    return tuple(json.loads(path.read_text())["rows"])


def model_class(job: TrainJob) -> str:
    """The reference table's class: 'moe' for routed experts, else dense by total
    parameters (< 10e9 small, < 100e9 medium, else large)."""
    if job.model.moe is not None:
        return "moe"
    params = job.model.total_params()
    return "dense-small" if params < 10e9 else "dense-medium" if params < 100e9 else (
        "dense-large")


def mfu_ceiling(job: TrainJob) -> dict | None:
    """The best published row for the job's class, its GPUs' architecture and its GEMM
    dtype (fp16 reads bf16's rows; rows of unstated dtype bound every dtype), or None."""
    dtype = job.precision_or_default.gemm_math.value
    dtype = "bf16" if dtype == "fp16" else dtype
    cls, arch = model_class(job), job.cluster.device.arch
    rows = [r for r in mfu_reference() if r["model_class"] == cls and r["arch"] == arch
            and r["dtype"] in (dtype, "any")]
    return max(rows, key=lambda r: r["mfu"], default=None)


def _mfu_note(job: TrainJob, mfu: float) -> str | None:
    """A note when `mfu` exceeds the best published for the job's class, naming it."""
    best = mfu_ceiling(job)
    if best is None or mfu <= best["mfu"]:
        return None
    return (f"MFU {mfu:.1%} exceeds the best published for {best['model_class']} on "
            f"{best['arch']} ({best['dtype']}): {best['mfu']:.1%}, {best['model']} "
            f"({best['source']}, {best['url']}); check the plan and the kernel model")


def _memory_note(job: TrainJob, need: float) -> str:
    """What a plan that does not fit needs, against what the device gives the allocator."""
    device, budget = job.cluster.device, job.memory_budget
    usable = budget.usable(device)[0]
    return (f"needs {need / 1e9:.1f} GB per GPU but {device.name} gives the allocator "
            f"{budget.budget_bytes(device) / 1e9:.1f} GB ({usable / 1e9:.1f} GB CUDA-visible"
            f" less a {budget.allocator_reserve:.0%} allocator reserve)")


def forecasts_from_columns(jobs: list[TrainJob], cols: dict[str, np.ndarray]) -> list[
        TrainForecast]:
    """TrainForecasts from the engine's result columns."""
    return [_forecast(job, cols, i) for i, job in enumerate(jobs)]


def _forecast(job: TrainJob, cols: dict[str, np.ndarray], i: int) -> TrainForecast:
    model, device = job.model, job.cluster.device
    time_s = float(cols["iteration_time_s"][i])
    gpus = job.plan.num_gpus
    flops = model_flops(model, job.tokens, job.seq_len, job.lora_rank)
    hw = hardware_flops(model, job.tokens, job.seq_len, job.recompute, job.lora_rank)
    peak = device.peak_flops(job.precision_or_default.gemm_math, "precision")
    memory = {k: float(cols[f"memory.{k}"][i]) for k in MEMORY_KINDS}
    breakdown = {k: float(cols[f"breakdown.{k}"][i]) for k in (
        "compute_s", "recompute_s", "bubble_s", "optimizer_s", "exposed_comm_s",
        *OVERLAP_PARTS, *SCALE_PARTS, "comm_total_s", "hidden_comm_s")}
    breakdown.update({f"exposed_comm.{k}_s": float(cols[f"breakdown.exposed_comm.{k}_s"][i])
                      for k in EXPOSED_KINDS})
    need = float(cols["memory_per_gpu_bytes"][i])
    budget = job.memory_budget.budget_bytes(device)
    notes = []
    if need > budget:
        notes.append(_memory_note(job, need))
    mfu = flops / (time_s * gpus * peak)
    note = _mfu_note(job, mfu)
    if note is not None:
        notes.append(note)
    if job.graph is not None and EagerGraph.expresses(job.plan, job.lora_rank):
        notes.append("memory: eager PyTorch allocates each gradient as backward frees that "
                     "layer's activations (zero_grad(set_to_none=True)), so `gradients` "
                     "counts only what they need beyond the activations")
    return TrainForecast(
        iteration_time_s=time_s, iteration_p50_s=float(cols["iteration_p50_s"][i]),
        iteration_p99_s=float(cols["iteration_p99_s"][i]), tokens_per_s=job.tokens / time_s,
        tflops_per_gpu=flops / time_s / gpus / 1e12, mfu=mfu,
        hfu=hw / (time_s * gpus * peak), model_flops=flops, hardware_flops=hw,
        memory_per_gpu_bytes=need, capacity_bytes=budget, fits=need <= budget,
        memory=memory, breakdown=breakdown,
        comm={k: float(cols[f"comm.{k}_s"][i]) for k in EXPOSED_KINDS},
        bubble_fraction=float(cols["bubble_fraction"][i]),
        gradient_bytes=float(cols["gradient_bytes"][i]), num_gpus=gpus,
        micro_batches=job.micro_batches, trainable_params=trainable_params(job), notes=notes)


def forecast_training(job: TrainJob, time_model: ExecutionTimeModel | None = None,
                      comm_model: CollectiveModel | None = None) -> TrainForecast:
    """Forecast one training iteration of `job` (None: the shipped calibrated kernel model
    and the comm layer's default collective model). A plan that does not fit in memory is
    still forecast, with `fits=False` and a note naming the bytes."""
    time_model = time_model or default_time_model()
    comm_model = comm_model or default_collective_model()
    cols = evaluate([job], time_model, comm_model)
    return _forecast(job, cols, 0)
