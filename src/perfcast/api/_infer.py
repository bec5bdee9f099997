"""`infer`: one request (or a static batch) on one GPU or a TP x CP group."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from pydantic import Field

from perfcast import __version__
from perfcast.api._base import Group, Request, register
from perfcast.api._choices import (
    EngineStackChoice,
    Hardware,
    KernelChoice,
    ModelChoice,
    PrecisionChoice,
    host_speed_for,
    serving_collective_model,
)
from perfcast.api._engine_host import EngineHost, engine_host
from perfcast.api._units import MAX_BATCH, MAX_GPUS, MAX_TOKENS
from perfcast.compose import HOST_PROFILES, Execution
from perfcast.errors import InputError
from perfcast.specs import Cluster, ModelSpec, ParallelPlan, Precision, Stack

if TYPE_CHECKING:  # the pricing layers (pandas) load when a request runs, not for --help
    from perfcast.comm import CollectiveModel
    from perfcast.compose import InferenceForecast
    from perfcast.kernels import ExecutionTimeModel

__all__ = ["InferEngine", "InferPlan", "InferRequest", "InferResult", "InferWorkload",
           "ResolvedInfer", "inference_plan"]


class InferPlan(Group):
    """One request runs on one TP x CP group."""

    tp: int | None = Field(None, ge=1, le=MAX_GPUS, description="Tensor-parallel degree.")
    num_gpus: int | None = Field(None, ge=1, le=MAX_GPUS, description="GPUs (= tp x cp for "
                                 "one request).")
    cp: int = Field(1, ge=1, le=MAX_GPUS, description="Context-parallel degree: the prompt "
                    "split over cp GPUs (ring attention prefill, sharded-KV decode).")

    def spec(self) -> ParallelPlan:
        return inference_plan(self.tp, self.num_gpus, self.cp)


MAX_IMAGES = 1_000  # images in one request: multimodal engines take a handful


def inference_plan(tp: int | None, num_gpus: int | None, cp: int = 1) -> ParallelPlan:
    """The TP x CP group of one request; tp defaults to what fills `num_gpus`."""
    if cp < 1:
        raise InputError("cp", f"must be >= 1, got {cp}", ">= 1")
    if tp is None:  # an explicit 0 is refused below, not replaced
        tp = max(num_gpus // cp, 1) if num_gpus else 1
    if num_gpus is not None and num_gpus != tp * cp:
        raise InputError("num_gpus", f"{num_gpus} GPUs with tp={tp}, cp={cp}: one request "
                         "runs on one TP x CP group", str(tp * cp))
    if tp < 1:
        raise InputError("tp", f"must be >= 1, got {tp}", ">= 1")
    return ParallelPlan(tp=tp, cp=cp)


class InferWorkload(Group):
    images: int = Field(0, ge=0, le=MAX_IMAGES, description="Images per request (multimodal "
                        "models: each adds its vision tokens and encoding time).")
    prompt_tokens: int = Field(512, ge=1, le=MAX_TOKENS, description="Prompt length per "
                               "request.")
    output_tokens: int = Field(128, ge=0, le=MAX_TOKENS, description="Generated tokens per "
                               "request.")
    batch: int = Field(1, ge=1, le=MAX_BATCH, description="Requests run together (static "
                       "batch).")


class InferEngine(Group):
    """How the engine launches kernels and what its host adds per step (default: the
    stack's: CUDA graphs and a serving engine's host profile, or eager PyTorch)."""

    execution: Execution | None = Field(None, description="Kernel launch mode (default: the "
                                        "stack's).")
    host: str | None = Field(None, description="Per-step host overhead of the serving "
                             "engine: " + ", ".join(HOST_PROFILES) + " (default: the "
                             "stack's).")


class InferRequest(Request):
    """TTFT, TPOT, end-to-end latency and memory of one request or a static batch."""

    command = "infer"
    model: ModelChoice = ModelChoice()
    hardware: Hardware = Hardware()
    plan: InferPlan = InferPlan()
    precision: PrecisionChoice = PrecisionChoice()
    workload: InferWorkload = InferWorkload()
    engine: InferEngine = InferEngine()
    kernels: KernelChoice = KernelChoice()
    stack: EngineStackChoice = EngineStackChoice()


@dataclass(frozen=True)
class ResolvedInfer:
    request: InferRequest
    model: ModelSpec
    machines: Cluster
    plan: ParallelPlan
    precision: Precision
    time_model: ExecutionTimeModel
    kernel_info: dict[str, Any]
    comm_model: CollectiveModel
    stack: Stack
    host: EngineHost


def resolve_infer(request: InferRequest) -> ResolvedInfer:
    spec = request.model.spec()
    plan = request.plan.spec()
    box = request.hardware.machines(plan.tp * plan.cp)
    precision = request.precision.spec()
    stack = request.stack.spec("infer")
    time_model, info = request.kernels.resolve(box.device, stack)
    host = engine_host(stack, request.engine.execution, request.engine.host,
                       host_speed_for(request.stack, info, stack.name))
    return ResolvedInfer(request, spec, box, plan, precision, time_model, info,
                         serving_collective_model(), stack, host)


@dataclass(frozen=True)
class InferResult:
    request: InferRequest
    inputs: dict[str, Any]
    forecast: InferenceForecast

    def payload(self) -> dict[str, Any]:
        f = self.forecast
        decode = f.decode.breakdown() if f.decode is not None else None
        return {
            "perfcast_version": __version__, "inputs": self.inputs,
            "ttft_s": f.ttft_s, "tpot_s": f.tpot_s, "e2e_s": f.e2e_s,
            "throughput_tok_s": f.throughput_tok_s,
            "vision_encode_s": f.vision_encode_s, "image_tokens": f.image_tokens,
            "context_parallel": (f.context_parallel.as_dict() if f.context_parallel is not None
                                 else None),
            "interval_s": {k: None if v is None else {"low": v[0], "high": v[1], "level": 0.9}
                           for k, v in f.intervals_s().items()},
            "memory_bytes": f.memory.as_dict(),
            "breakdown": {"prefill": f.prefill.breakdown(), "decode_step": decode,
                          "vision_encode": f.vision.breakdown() if f.vision is not None
                          else None,
                          "by_family": f.breakdown().to_dict("records")},
            "notes": f.notes,
        }


def execute_infer(r: ResolvedInfer) -> InferResult:
    from perfcast.compose import forecast_inference

    w, h = r.request.workload, r.host
    forecast = forecast_inference(
        r.model, r.machines, batch=w.batch, prompt_tokens=w.prompt_tokens,
        output_tokens=w.output_tokens, precision=r.precision, plan=r.plan,
        execution=h.execution, host=h.profile, time_model=r.time_model, images=w.images,
        comm_model=r.comm_model, dispatch_s=h.dispatch_s, step_host_s=h.step_s,
        decode_host_s=0.0 if r.stack.serving_engine else h.generate_s,
        host_spread=h.host_spread,
        batch_ops=_eager_graph(r))
    inputs = {"model": r.model.name, "gpu": r.machines.device.name, "cluster": r.machines.name,
              "tp": r.plan.tp, "cp": r.plan.cp, "images": w.images, "batch": w.batch,
              "prompt_tokens": w.prompt_tokens, "output_tokens": w.output_tokens,
              "precision": r.precision.model_dump(mode="json"), "stack": r.stack.card(),
              **h.inputs(), "kernel_model": r.kernel_info}
    forecast.notes.extend(f"model: {note}" for note in r.model.inferred)
    if not r.stack.serving_engine:
        forecast.notes.append(
            f"{r.stack.name} runs generate()'s eager module graph (prefill with last-token "
            "logits, then one decode step per token over a DynamicCache), each token paying "
            f"generate()'s own host bookkeeping ({h.generate_s * 1e3:.2f} ms, host_generate_s)"
            f" on a host {h.host_speed:.3g}x as fast as the stack's reference CPU "
            f"({r.stack.host.reference_cpu})"
            + ("" if h.generate_s else ": not measured for this stack, so this TPOT is a "
               "lower bound"))
    return InferResult(r.request, inputs, forecast)


def _eager_graph(r: ResolvedInfer):
    """The op builder of a stack that is not a serving engine: the model's eager PyTorch
    graph (ops.eager_batch_ops) with the stack's attention and fusion; None: the engine's."""
    if r.stack.serving_engine:
        return None
    if r.plan.cp > 1 or r.request.workload.images:
        raise InputError("stack", f"{r.stack.name} (generate()'s eager graph) is modelled "
                         "without context parallelism or images", "a serving stack: "
                         "trtllm, vllm or sglang")
    from perfcast.ops import eager_batch_ops

    attention = "sdpa" if r.stack.attention.fused else "eager"
    return partial(eager_batch_ops, r.model, precision=r.precision, plan=r.plan,
                   attention=attention, fused=bool(r.stack.fused))


register(InferRequest, resolve_infer, execute_infer)
