"""`forecast_training`: one training iteration of a TrainJob, with its breakdown."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from perfcast.comm import CollectiveModel, default_collective_model
from perfcast.kernels import ExecutionTimeModel, default_time_model
from perfcast.ops._training import lora_params
from perfcast.train._engine import EXPOSED_KINDS, evaluate
from perfcast.train._flops import hardware_flops, model_flops
from perfcast.train._job import TrainJob
from perfcast.train._memory import MEMORY_KINDS

__all__ = ["FLOP_CONVENTION", "TrainForecast", "default_time_model", "forecast_training",
           "forecasts_from_columns"]

FLOP_CONVENTION = (
    "model FLOPs = 6 N T + 3 x attention forward (PaLM/Megatron-LM: N = matmul parameters "
    "incl. the LM head, attention counted over the full s x s scores, no causal halving); "
    "LoRA: 4 N_base + 6 N_adapter; recomputation excluded (hardware FLOPs/HFU include it)")


@dataclass(frozen=True)
class TrainForecast:
    """One training iteration. `breakdown`'s compute_s + bubble_s + optimizer_s +
    exposed_comm_s (the sum of its exposed_comm.<kind>_s) equal iteration_time_s;
    recompute_s is the part of compute_s that recomputation adds and comm_total_s every
    collective's full time on the busiest stage, overlapped or not (`comm` per kind; the
    exposed p2p time is the makespan the sends add, which can exceed one stage's own sends
    when they chain across stages). `memory` is the fullest
    stage's bytes per GPU by kind; `fits` compares their sum with the device's capacity."""

    iteration_time_s: float
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
        "comm_total_s")}
    breakdown.update({f"exposed_comm.{k}_s": float(cols[f"breakdown.exposed_comm.{k}_s"][i])
                      for k in EXPOSED_KINDS})
    need = float(cols["memory_per_gpu_bytes"][i])
    notes = []
    if need > device.hbm_capacity_bytes:
        notes.append(f"needs {need / 1e9:.1f} GB per GPU but {device.name} has "
                     f"{device.hbm_capacity_bytes / 1e9:.1f} GB")
    return TrainForecast(
        iteration_time_s=time_s, tokens_per_s=job.tokens / time_s,
        tflops_per_gpu=flops / time_s / gpus / 1e12, mfu=flops / (time_s * gpus * peak),
        hfu=hw / (time_s * gpus * peak), model_flops=flops, hardware_flops=hw,
        memory_per_gpu_bytes=need, capacity_bytes=device.hbm_capacity_bytes,
        fits=need <= device.hbm_capacity_bytes, memory=memory, breakdown=breakdown,
        comm={k: float(cols[f"comm.{k}_s"][i]) for k in EXPOSED_KINDS},
        bubble_fraction=float(cols["bubble_fraction"][i]),
        gradient_bytes=float(cols["gradient_bytes"][i]), num_gpus=gpus,
        micro_batches=job.micro_batches, trainable_params=_trainable(job), notes=notes)


def _trainable(job: TrainJob) -> float:
    if job.lora_rank:
        return float(lora_params(job.model, job.lora_rank))
    return float(job.model.total_params())


def forecast_training(job: TrainJob, time_model: ExecutionTimeModel | None = None,
                      comm_model: CollectiveModel | None = None) -> TrainForecast:
    """Forecast one training iteration of `job` (None: the shipped calibrated kernel model
    and the comm layer's default collective model). A plan that does not fit in memory is
    still forecast, with `fits=False` and a note naming the bytes."""
    time_model = time_model or default_time_model()
    comm_model = comm_model or default_collective_model()
    cols = evaluate([job], time_model, comm_model)
    return _forecast(job, cols, 0)
