"""`step`: one forward, decode or training iteration of a model, as eager PyTorch runs it.

A single GPU's iteration is the eager kernel graph (`ops.eager_ops`) priced and queued by
`compose.step_time`; data-parallel (DDP bucket overlap) and pipeline-parallel (one micro-batch)
runs compose that step with `compose.data_parallel_step` / `compose.pipeline_step`.
The software stack (`--stack`, default hf-transformers: SDPA attention, unfused, eager
dispatch) picks the attention kernel, the fusions, the launch mode and the host's per-kernel
dispatch cost; explicit `--fused` / `--execution` override it. `validate models` builds these
same requests with the legacy stack its PyTorch-1.x labels ran, so validation checks this
command.
A torchvision ResNet (`ops.CNN_MODELS`) runs its eval-mode forward through
`compose.cnn_inference` (images/s, no tokens); a ViT (model_type vit) is an encoder over
its image's patches plus the class token, so its sequence length is fixed by the image.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, model_validator

from perfcast import __version__
from perfcast.api._base import Group, Request, register
from perfcast.api._choices import (
    EngineStackChoice,
    KernelChoice,
    ModelChoice,
    collective_model,
    device_from_spec,
    host_speed_for,
)
from perfcast.api._engine_host import engine_host
from perfcast.api._units import MAX_BATCH, MAX_GPUS, MAX_TOKENS
from perfcast.compose import Execution
from perfcast.errors import InputError, check_output_file, writing
from perfcast.specs import (
    Cluster,
    Device,
    DType,
    ModelSpec,
    ParallelPlan,
    Precision,
    Stack,
    bytes_per_element,
    cluster_for,
    get_device,
    parse_dtype,
)

if TYPE_CHECKING:  # the pricing layers load when a request runs, not for `step --help`
    from perfcast.comm import CollectiveModel
    from perfcast.compose import ParallelStep, StepForecast
    from perfcast.compose._vision import CNNInference
    from perfcast.kernels import ExecutionTimeModel

__all__ = ["ResolvedCNNStep", "ResolvedStep", "StepEngine", "StepHardware", "StepOutputs",
           "StepPlan", "StepPrecision", "StepRequest", "StepResult", "StepStack", "StepWorkload",
           "step_layout", "step_stack"]

DEFAULT_GPU = "a100-sxm4-80gb"
DEFAULT_SEQ_LEN = 512  # tokens per sequence when --seq-len is left out (not a ViT)


class StepHardware(Group):
    """One catalog GPU, or a device spec file (the local CPU `perfcast measure` described);
    a multi-GPU step runs on nodes of 8 built around it."""

    gpu: str | None = Field(None, description="Catalog GPU name (see `hardware list`); "
                            f"default {DEFAULT_GPU}.")
    device_spec: Path | None = Field(None, description="Device spec JSON instead of --gpu "
                                     "(`perfcast measure` writes <out>.device.json).")

    @model_validator(mode="before")
    @classmethod
    def _gpu_only(cls, value: Any) -> Any:
        return {"gpu": value} if isinstance(value, str) else value

    def device(self) -> Device:
        if self.device_spec is None:
            return get_device(self.gpu or DEFAULT_GPU)
        if self.gpu is not None:
            raise InputError("device_spec", "give one of --gpu or --device-spec",
                             "a catalog GPU, or a device spec file")
        return device_from_spec(self.device_spec)


class StepPlan(Group):
    """Tensor, pipeline and data parallel degrees (pipeline combines with neither)."""

    num_gpus: int | None = Field(None, ge=1, le=MAX_GPUS, description="GPUs (= tp x pp x dp).")
    tp: int = Field(1, ge=1, le=MAX_GPUS, description="Tensor-parallel degree.")
    pp: int = Field(1, ge=1, le=MAX_GPUS, description="Pipeline stages (one micro-batch).")
    dp: int = Field(1, ge=1, le=MAX_GPUS, description="Data-parallel replicas (DDP).")

    def gpus(self) -> int:
        return step_layout(self.num_gpus, self.tp, self.pp, self.dp)


def step_layout(num_gpus: int | None, tp: int, pp: int, dp: int) -> int:
    """GPUs of a tp x pp x dp layout, checked against `num_gpus` when given."""
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


class StepWorkload(Group):
    batch: int = Field(1, ge=1, le=MAX_BATCH, description="Sequences in the batch (global, "
                       "across dp).")
    seq_len: int | None = Field(None, ge=1, le=MAX_TOKENS, description="Tokens per "
                                "sequence (default 512; a ViT's is its image's patches + "
                                "CLS; unused in decode: one new token each).")
    mode: str = Field("forward", description="forward, training (forward + backward) or "
                      "decode (one generate() step over --context cached tokens).")
    context: int | None = Field(None, ge=1, le=MAX_TOKENS, description="Tokens already in "
                                "the KV cache (decode only).")
    logits: str = Field("all", description="Logits of all positions (a forward) or the last "
                        "(generate(): logits_to_keep=1).")


class StepPrecision(Group):
    dtype: str = Field("fp32", description="Weights, activations and math dtype.")


class StepEngine(Group):
    """How the iteration runs: kernel launch mode, fusion, recompute, optimizer step."""

    execution: Execution | None = Field(None, description="Kernel launch mode (default: "
                                        "the stack's).")
    fused: bool | None = Field(None, description="Apply the fusion rules (torch.compile-"
                               "style; default: the stack's).")
    recompute: bool = Field(False, description="Full activation recompute (training).")
    optimizer: str | None = Field(None, description="Add the optimizer step (training): "
                                  "adam or sgd.")


class StepOutputs(Group):
    trace: Path | None = Field(None, description="Write a Chrome-trace/Perfetto JSON of the "
                               "step here.")


class StepRequest(Request):
    """Time, 90% interval and where the time goes of one iteration."""

    command = "step"
    model: ModelChoice = ModelChoice()
    hardware: StepHardware = StepHardware()
    plan: StepPlan = StepPlan()
    workload: StepWorkload = StepWorkload()
    precision: StepPrecision = StepPrecision()
    engine: StepEngine = StepEngine()
    stack: EngineStackChoice = EngineStackChoice()
    kernels: KernelChoice = KernelChoice()
    outputs: StepOutputs = StepOutputs()


@dataclass(frozen=True)
class StepStack:
    """What the stack (and the explicit options over it) make of the step: attention kernel,
    fusion, launch mode and host costs in seconds on this run's host."""

    stack: Stack
    attention: str
    fused: bool
    execution: Execution
    dispatch_s: float
    host_s: float
    overridden: tuple[str, ...]
    host_speed: float = 1.0
    host_spread: tuple[float, float] = (1.0, 1.0)


def step_stack(stack: Stack, engine: StepEngine, host_speed: float = 1.0,
               training: bool = False) -> StepStack:
    """The stack's choices with `engine`'s explicit ones on top: attention kernel and fusion
    here, launch mode and host costs (divided by `host_speed`; a training step's where the
    stack measured them) from `engine_host`, the one place a stack's host becomes seconds."""
    fused = engine.fused if engine.fused is not None else bool(stack.fused)
    host = engine_host(stack, engine.execution, None, host_speed, training)
    overridden = tuple(name for name in ("fused", "execution")
                       if getattr(engine, name) is not None)
    return StepStack(stack, "sdpa" if stack.attention.fused else "eager", fused,
                     host.execution, host.dispatch_s, host.step_s, overridden, host_speed,
                     host.host_spread)


@dataclass(frozen=True)
class ResolvedStep:
    request: StepRequest
    model: ModelSpec
    machines: Cluster
    gpus: int
    dtype: DType
    time_model: ExecutionTimeModel
    kernel_info: dict[str, Any]
    comm_model: CollectiveModel
    stack: StepStack
    seq_len: int = DEFAULT_SEQ_LEN  # tokens per sequence (a ViT's: fixed by its image)


@dataclass(frozen=True)
class ResolvedCNNStep:
    """The eval-mode forward of a torchvision ResNet on one GPU (`compose.cnn_inference`)."""

    request: StepRequest
    machines: Cluster
    dtype: DType
    time_model: ExecutionTimeModel
    kernel_info: dict[str, Any]
    stack: StepStack


def resolve_step(request: StepRequest) -> ResolvedStep | ResolvedCNNStep:
    """Checks in the order the command always made them, then the specs."""
    from perfcast.ops import CNN_MODELS, EAGER_MODES

    if request.model.name in CNN_MODELS:
        return _resolve_cnn(request)
    w, plan = request.workload, request.plan
    if w.mode not in EAGER_MODES:
        raise InputError("mode", f"unknown mode {w.mode!r}", list(EAGER_MODES))
    _check_workload(w)
    gpus = plan.gpus()
    if w.batch % plan.dp:
        raise InputError("batch", f"{w.batch} sequences do not split over dp={plan.dp}",
                         f"a multiple of {plan.dp}")
    check_output_file(request.outputs.trace, "trace")
    spec = request.model.spec()
    dtype = parse_dtype(request.precision.dtype, "dtype")
    machines = cluster_for(request.hardware.device(), gpus)
    stack = request.stack.spec("step")
    time_model, info = request.kernels.resolve(machines.device, stack)
    speed = host_speed_for(request.stack, info, stack.name)
    return ResolvedStep(request, spec, machines, gpus, dtype, time_model, info,
                        collective_model(),
                        step_stack(stack, request.engine, speed, w.mode == "training"),
                        _seq_len(spec, w.seq_len, w.logits))


# Options of a transformer step a CNN forward does not read: refused, never ignored.
_TRANSFORMER_ONLY = ("seq_len", "context", "logits", "num_gpus", "tp", "pp", "dp",
                     "recompute", "optimizer")


def _seq_len(spec: ModelSpec, given: int | None, logits: str = "all") -> int:
    """Tokens per sequence: --seq-len (default 512), or a ViT's patches + class token, which
    an explicit different --seq-len contradicts (and whose head reads the class token
    only, so --logits last is refused too)."""
    if spec.image is None:
        return DEFAULT_SEQ_LEN if given is None else given
    if logits != "all":
        raise InputError("logits", f"{spec.name} classifies the class token only",
                         "all (the default) for a ViT")
    tokens = spec.image.tokens
    if given is not None and given != tokens:
        raise InputError("seq_len", f"{spec.name} sees {tokens} tokens per image "
                         f"(({spec.image.image_size}/{spec.image.patch_size})^2 patches + "
                         f"the class token), got {given}", f"{tokens}, or omit --seq-len")
    return tokens


def _resolve_cnn(request: StepRequest) -> ResolvedCNNStep:
    """A ResNet's inference forward: mode forward on one GPU; the transformer options are
    refused (as `perfcast train` refuses them for a CNN)."""
    name, w = request.model.name, request.workload
    if request.model.config is not None:
        raise InputError("model", "give exactly one of --model or --model-config",
                         "a catalog name or a config.json path")
    if w.mode != "forward":
        raise InputError("mode", f"`perfcast step` runs {name}'s inference forward only, "
                         f"not {w.mode!r}", f"forward; train it with `perfcast train "
                         f"--model {name}`")
    option = request.first_given(*_TRANSFORMER_ONLY)
    if option is not None:
        raise InputError(option, f"{name} is a CNN: its forward takes images, on one GPU",
                         f"omit --{option.replace('_', '-')} for a CNN")
    check_output_file(request.outputs.trace, "trace")
    dtype = parse_dtype(request.precision.dtype, "dtype")
    machines = cluster_for(request.hardware.device(), 1)
    stack = request.stack.spec("step")
    time_model, info = request.kernels.resolve(machines.device, stack)
    return ResolvedCNNStep(request, machines, dtype, time_model, info,
                           step_stack(stack, request.engine,
                                      host_speed_for(request.stack, info, stack.name)))


def _check_workload(w: StepWorkload) -> None:
    """Decode needs --context and runs one new token per sequence (--seq-len is unused there:
    the payload records 1); no other mode takes --context; training computes every
    position's logits."""
    from perfcast.ops import EAGER_LOGITS

    if w.logits not in EAGER_LOGITS:
        raise InputError("logits", f"unknown logits {w.logits!r}", list(EAGER_LOGITS))
    if w.mode == "decode":
        if w.context is None:
            raise InputError("context", "decode needs the tokens already in the KV cache",
                             "--context N (N >= 1)")
    elif w.context is not None:
        raise InputError("context", f"only applies to --mode decode, not {w.mode}",
                         "omit --context, or --mode decode")
    if w.mode == "training" and w.logits != "all":
        raise InputError("logits", "training computes the logits of every position", "all")


@dataclass(frozen=True)
class StepResult:
    """One GPU's step (`step`), the multi-GPU composition on top (`parallel`, None on one
    GPU or with tp only) and the payload's `inputs`."""

    request: StepRequest
    inputs: dict[str, Any]
    step: StepForecast
    parallel: ParallelStep | None = None
    trace: Path | None = None
    memory_bytes: dict[str, float] | None = None
    images: int | None = None  # images per step (a CNN or ViT), else None
    notes: tuple[str, ...] = ()

    @property
    def time_s(self) -> float:
        """The iteration: one GPU's step plus the exposed data/pipeline-parallel comm."""
        return self.step.time_s if self.parallel is None else self.parallel.time_s

    @property
    def exposed_comm_s(self) -> float:
        return 0.0 if self.parallel is None else self.parallel.exposed_comm_s

    @property
    def tokens(self) -> int:
        """Tokens the step processes: new tokens of every sequence (one each in decode;
        none for a CNN)."""
        seq = self.inputs["seq_len"]
        return 0 if seq is None else self.request.workload.batch * seq

    @property
    def kernels(self) -> int:
        """Kernel launches in one GPU's step."""
        return int(self.step.ops["count"].sum())

    def payload(self) -> dict[str, Any]:
        one, total = self.step, self.time_s
        low, high = one.interval_s or (one.time_s, one.time_s)
        out = {
            "perfcast_version": __version__, "inputs": self.inputs,
            "time_s": total, "interval_s": {"low": low + total - one.time_s,
                                            "high": high + total - one.time_s, "level": 0.9},
            "breakdown": {**one.breakdown(), **_phases(one),
                          "exposed_parallel_comm_s": self.exposed_comm_s},
            "kernels": self.kernels,
            "tokens_per_s": self.tokens / total if total > 0 and self.tokens else None,
        }
        if self.images is not None:
            out["images_per_s"] = self.images / total if total > 0 else None
            out["notes"] = list(self.notes)
        if self.memory_bytes is not None:
            out["memory_per_gpu_bytes"] = sum(self.memory_bytes.values())
            out["memory_bytes"] = self.memory_bytes
        if self.trace is not None:
            out["trace"] = str(self.trace)
        return out


def _phases(step: StepForecast) -> dict[str, float]:
    """Seconds of kernels per phase (forward, recompute, backward, optimizer)."""
    g = step.ops.groupby("phase", sort=False)["total_s"].sum()
    return {f"phase.{k}": float(v) for k, v in g.items()}


def _parallel(r: ResolvedStep, one: StepForecast) -> ParallelStep | None:
    """DDP: fp32 gradients of a tp shard all-reduced over dp; pipeline: one micro-batch's
    activations sent across each stage boundary."""
    from perfcast.compose import data_parallel_step, pipeline_step

    p, w = r.request.plan, r.request.workload
    if p.dp > 1:
        return data_parallel_step(one, 4.0 * r.model.total_params() / p.tp, r.machines, p.dp,
                                  r.comm_model, stride=p.tp)
    if p.pp > 1:
        act = bytes_per_element(r.dtype) * w.batch * _new_tokens(r) * r.model.hidden_size
        return pipeline_step(one, act, r.machines, p.pp, r.comm_model)
    return None


def _new_tokens(r: ResolvedStep) -> int:
    """Tokens per sequence through the model this step: one in decode."""
    return 1 if r.request.workload.mode == "decode" else r.seq_len


def execute_step(r: ResolvedStep | ResolvedCNNStep) -> StepResult:
    from perfcast.compose import chrome_trace, step_time, step_timeline
    from perfcast.ops import eager_ops

    if isinstance(r, ResolvedCNNStep):
        return _execute_cnn(r)
    q = r.request
    w, p, e, s = q.workload, q.plan, q.engine, r.stack
    seq_len = _new_tokens(r)
    ops = eager_ops(r.model, w.batch // p.dp, seq_len, w.mode, Precision.uniform(r.dtype),
                    ParallelPlan(tp=p.tp), s.fused, e.recompute, e.optimizer,
                    attention=s.attention, context=w.context or 0, logits=w.logits)
    one = step_time(ops, r.machines, s.execution, host_s=s.host_s, time_model=r.time_model,
                    comm_model=r.comm_model, dispatch_s=s.dispatch_s, host_spread=s.host_spread)
    inputs = {"model": r.model.name, "gpu": r.machines.device.name, "num_gpus": r.gpus,
              "tp": p.tp, "pp": p.pp, "dp": p.dp, "batch": w.batch, "seq_len": seq_len,
              "mode": w.mode, "context": w.context, "logits": w.logits,
              "dtype": r.dtype.value, "stack": s.stack.name, "attention": s.attention,
              "execution": str(s.execution), "fused": s.fused, "overridden": list(s.overridden),
              "dispatch_s": s.dispatch_s, "host_speed": s.host_speed,
              "recompute": e.recompute, "optimizer": e.optimizer,
              "kernel_model": r.kernel_info}
    trace = q.outputs.trace
    if trace is not None:
        with writing(trace, "trace"):
            trace.write_text(json.dumps(chrome_trace(step_timeline(one, s.execution))))
    images = w.batch if r.model.image is not None else None
    return StepResult(q, inputs, one, _parallel(r, one), trace, _memory(r, seq_len), images)


def _execute_cnn(r: ResolvedCNNStep) -> StepResult:
    """`compose.cnn_inference` on the stack's launch mode and fusion (fused: batch norm and
    ReLU folded into the convs), with its notes (e.g. borrowed tensor-core conv
    efficiency)."""
    from perfcast.compose import chrome_trace, step_timeline
    from perfcast.compose._vision import cnn_inference

    q, s = r.request, r.stack
    w = q.workload
    fc: CNNInference = cnn_inference(q.model.name, w.batch, r.machines, r.dtype.value,
                                     s.execution, s.fused, r.time_model,
                                     host_s=s.host_s, dispatch_s=s.dispatch_s,
                                     host_spread=s.host_spread)
    inputs = {"model": q.model.name, "gpu": r.machines.device.name, "num_gpus": 1,
              "tp": 1, "pp": 1, "dp": 1, "batch": w.batch, "seq_len": None,
              "image_size": 224, "mode": "forward", "context": None, "logits": None,
              "dtype": r.dtype.value, "stack": s.stack.name, "attention": None,
              "execution": str(s.execution), "fused": s.fused, "overridden": list(s.overridden),
              "dispatch_s": s.dispatch_s, "host_speed": s.host_speed,
              "recompute": False, "optimizer": None, "kernel_model": r.kernel_info}
    trace = q.outputs.trace
    if trace is not None:
        with writing(trace, "trace"):
            trace.write_text(json.dumps(chrome_trace(step_timeline(fc.step, s.execution))))
    return StepResult(q, inputs, fc.step, None, trace, None, w.batch, tuple(fc.notes))


def _memory(r: ResolvedStep, seq_len: int) -> dict[str, float]:
    """Bytes per GPU of the step (train.eager_step_memory), model states under the stack's
    training memory policy; full recompute keeps each layer's input, not its activations."""
    from perfcast.train import eager_step_memory

    q, w = r.request, r.request.workload
    batch = w.batch // q.plan.dp
    logits = batch if (w.logits == "last" or w.mode == "decode"
                       or r.model.image is not None) else None  # a ViT: CLS token only
    out = eager_step_memory(r.model, Precision.uniform(r.dtype), batch, seq_len, w.mode,
                            r.stack.attention != "eager", r.stack.stack.training_memory,
                            w.context or 0, logits, q.plan.tp)
    if q.engine.recompute:
        layer_input = bytes_per_element(r.dtype) * batch * seq_len * r.model.hidden_size
        out["activations"] = layer_input * r.model.num_layers
    return out


register(StepRequest, resolve_step, execute_step)
