"""`train`: one training iteration at any scale, the plan search, an RLHF PPO step, or one
data-parallel iteration of a torchvision ResNet.

One request asks one of four questions: a ResNet model asks the CNN one, `sweep` the plan
search, `rlhf` the PPO step, and otherwise it is one LLM iteration. `resolve_train` decides
which, once, and returns that question's own resolved type (`ResolvedTrain`,
`ResolvedTrainSweep`, `ResolvedRLHF`, `ResolvedCNNTrain`): options one question does not take
are refused there (a ResNet trains data-parallel only; `--trace-out` traces one LLM
iteration), so no later step can mix two questions' options.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from perfcast import __version__
from perfcast.api._base import Group, Request, register
from perfcast.api._choices import Hardware, KernelChoice, ModelChoice, StackChoice
from perfcast.api._engine_host import engine_host
from perfcast.api._network import NetworkOptions, network_summary
from perfcast.api._units import MAX_BATCH, MAX_GPUS, MAX_TOKENS
from perfcast.errors import InputError, check_output_file, writing
from perfcast.specs import (
    Cluster,
    ModelSpec,
    ParallelPlan,
    PipelineSchedule,
    Precision,
    Stack,
    bytes_per_element,
    get_stack,
    parse_dtype,
    stack_names,
)
from perfcast.train import ScaleEffects

if TYPE_CHECKING:  # the pricing layers load when a request runs, not for `train --help`
    import pandas as pd

    from perfcast.compose import EagerGraph
    from perfcast.kernels import ExecutionTimeModel
    from perfcast.report import TrainSchedule
    from perfcast.train import (
        CNNTrainForecast,
        CommOverlap,
        MemoryBudget,
        RLHFForecast,
        TrainForecast,
        TrainJob,
    )

__all__ = ["CNNTrainResult", "PlanSearch", "RLHFOptions", "RLHFResult", "ResolvedCNNTrain",
           "ResolvedRLHF", "ResolvedTrain", "ResolvedTrainSweep", "TrainKernels",
           "TrainMemory", "TrainOutputs", "TrainPlan", "TrainRecipe", "TrainRequest", "TrainResult",
           "TrainScale", "TrainSweepResult", "TrainWorkload", "pipeline_schedule",
           "train_layout"]

_FIT_HINT = ("a higher --zero, more --tp/--pp/--cp, --sp, --recompute full or a smaller "
             "--micro-batch")
# Options a ResNet does not take: it trains data-parallel only (PyTorch DDP).
_DDP_ONLY = ("tp", "pp", "cp", "cp_algorithm", "ep", "sp", "zero", "shard_group",
             "tp_comm_overlap", "overlap_param_gather", "recompute", "lora_rank", "sweep",
             "rlhf",
             "stack", "allow_oom", "seq_len", "expert_skew", "schedule", "virtual_stages",
             "top", "response_tokens", "generation_tp", "memory_policy", "allocator_reserve",
             *ScaleEffects.model_fields)
# Options `--sweep` searches over itself (or, for allow_oom, reports as the `fits` column).
_SWEPT = ("tp", "pp", "cp", "cp_algorithm", "ep", "sp", "zero", "shard_group", "schedule",
          "virtual_stages", "recompute", "allow_oom")
CP_ALGORITHMS = ("ring", "all-to-all")
# Options only one question reads: (its switch, the options).
_ONLY_WITH = (("sweep", ("top",)), ("rlhf", ("response_tokens", "generation_tp")))


class TrainPlan(Group):
    """The parallel layout: tp x pp x cp x dp GPUs, plus experts, ZeRO and the schedule."""

    num_gpus: int | None = Field(None, ge=1, le=MAX_GPUS, description="GPUs (= tp x pp x cp "
                                 "x dp).")
    tp: int = Field(1, ge=1, le=MAX_GPUS, description="Tensor-parallel degree.")
    pp: int = Field(1, ge=1, le=MAX_GPUS, description="Pipeline stages.")
    dp: int | None = Field(None, ge=1, le=MAX_GPUS, description="Data-parallel degree "
                           "(default: fills --num-gpus).")
    ep: int = Field(1, ge=1, le=MAX_GPUS, description="Expert-parallel degree (MoE).")
    cp: int = Field(1, ge=1, le=MAX_GPUS, description="Context-parallel degree (ring "
                    "attention).")
    cp_algorithm: str = Field("ring", description="Context parallelism: ring (KV blocks "
                              "passed around, Megatron-Core) or all-to-all (DeepSpeed-Ulysses; "
                              "needs --cp > 1).")
    sp: bool = Field(False, description="Megatron sequence parallelism (needs --tp > 1).")
    zero: int = Field(0, ge=0, le=3, description="ZeRO stage 0-3 (FSDP FULL_SHARD = 3, "
                      "SHARD_GRAD_OP = 2).")
    shard_group: int | None = Field(None, ge=1, le=MAX_GPUS, description="Hybrid sharding "
                                    "(HSDP): ZeRO/FSDP shards within groups of this many DP "
                                    "ranks, replicated across the rest (needs --zero >= 1).")
    schedule: str = Field("1f1b", description="gpipe, 1f1b or interleaved-1f1b.")
    virtual_stages: int = Field(1, ge=1, le=1024, description="Model chunks per stage "
                                "(interleaved-1f1b).")
    tp_comm_overlap: bool = Field(False, description="Pipeline TP collectives with the "
                                  "layer's GEMMs (Megatron-Core --tp-comm-overlap; needs "
                                  "--tp > 1).")
    overlap_param_gather: bool = Field(False, description="Overlap ZeRO-1/2's parameter "
                                       "all-gather with the next forward (Megatron-Core "
                                       "--overlap-param-gather; needs --zero 1 or 2).")

    def layout(self) -> tuple[int, int]:
        """(dp, GPUs) of this layout."""
        return train_layout(self.num_gpus, self.tp, self.pp, self.dp, self.cp)

    def spec(self, dp: int, expert_skew: float) -> ParallelPlan:
        if self.cp_algorithm not in CP_ALGORITHMS:
            raise InputError("cp_algorithm", f"unknown {self.cp_algorithm!r}", CP_ALGORITHMS)
        if self.cp_algorithm != "ring" and self.cp == 1:
            raise InputError("cp_algorithm", "there is no context parallelism at cp=1",
                             "--cp > 1, or no --cp-algorithm")
        return ParallelPlan(tp=self.tp, pp=self.pp, dp=dp, ep=self.ep, cp=self.cp, sp=self.sp,
                            cp_algorithm=self.cp_algorithm,
                            zero_stage=self.zero, shard_group=self.shard_group,
                            schedule=pipeline_schedule(self.schedule),
                            virtual_stages=self.virtual_stages, expert_skew=expert_skew)


def train_layout(num_gpus: int | None, tp: int, pp: int, dp: int | None,
                 cp: int) -> tuple[int, int]:
    """(dp, GPUs): dp defaults to what fills `num_gpus`."""
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


def pipeline_schedule(name: str) -> PipelineSchedule:
    """The pipeline schedule named `name`, or an InputError listing them."""
    try:
        return PipelineSchedule(name)
    except ValueError:
        raise InputError("schedule", f"unknown schedule {name!r}",
                         [s.value for s in PipelineSchedule]) from None


class TrainWorkload(Group):
    """What one iteration processes."""

    micro_batch: int = Field(1, ge=1, le=MAX_BATCH, description="Sequences per micro-batch "
                             "per DP rank.")
    global_batch: int | None = Field(None, ge=1, le=MAX_BATCH, description="Sequences per "
                                     "iteration, all DP ranks (default: one micro-batch per "
                                     "rank).")
    seq_len: int = Field(2048, ge=1, le=MAX_TOKENS, description="Tokens per sequence (RLHF: "
                         "per prompt).")


class TrainRecipe(Group):
    """How the model trains: dtype, recomputation, LoRA, MoE routing skew."""

    recompute: str = Field("none", description="none, selective or full.")
    dtype: str | None = Field(None, description="bf16, fp16, fp32 or fp8 (FP8 GEMMs); "
                              "default bf16 (fp32 for CNNs).")
    lora_rank: int | None = Field(None, ge=1, le=65_536, description="LoRA rank on all linear "
                                  "layers.")
    expert_skew: float = Field(1.0, ge=1.0, le=64.0, description="Most loaded EP rank / mean "
                               "(MoE).")
    memory_policy: str | None = Field(None, description="Model-state dtypes: amp (16-bit "
                                      "params+grads, fp32 master+Adam: 16 B/param), "
                                      "amp-distributed (amp, Megatron's distributed "
                                      "optimizer), pure-bf16 (8 B/param), fp32 (16 B/param) "
                                      "or torch-amp (fp32 + autocast's 16-bit weight copy); "
                                      "default: the stack's.")


class PlanSearch(Group):
    """`sweep`: search every plan for the GPUs instead of forecasting the one given."""

    sweep: bool = Field(False, description="Search every plan for --num-gpus; print the "
                        "fastest that fit.")
    top: int = Field(10, ge=1, le=100_000, description="Plans to print with --sweep.")


class RLHFOptions(Group):
    """`rlhf`: one PPO step (generation, scoring, actor and critic training) instead of one
    pre-training iteration."""

    rlhf: bool = Field(False, description="One RLHF PPO step: generation, scoring, actor and "
                       "critic training.")
    response_tokens: int = Field(256, ge=1, le=MAX_TOKENS, description="RLHF: generated "
                                 "tokens per prompt.")
    generation_tp: int = Field(1, ge=1, le=MAX_GPUS, description="RLHF: GPUs per generation "
                               "replica.")


class TrainScale(Group):
    """What many ranks add to one LLM iteration (perfcast.train._scale): stragglers, exposed
    host and data-loading time, checkpoint stalls. All off by default: no published value
    carries to other clusters."""

    rank_jitter_cv: float = Field(0.0, ge=0.0, le=1.0, description="Per-rank, per-iteration "
                                  "relative std of compute time; the iteration waits for "
                                  "the slowest of all GPUs.")
    host_s_per_iteration: float = Field(0.0, ge=0.0, le=3600.0, description="Exposed host "
                                        "seconds per iteration (logging, Python) beyond an "
                                        "eager stack's own kernel dispatch.")
    dataloader_s_per_iteration: float = Field(0.0, ge=0.0, le=3600.0, description="Exposed "
                                              "data-loading seconds per iteration (default 0: "
                                              "prefetched).")
    checkpoint_every_iterations: int | None = Field(
        None, ge=1, le=10**9, description="Checkpoint every N iterations (needs "
        "--checkpoint-bandwidth-bps).")
    checkpoint_bandwidth_bps: float | None = Field(None, gt=0.0, description="Aggregate "
                                                   "checkpoint write bandwidth, bytes/s.")
    checkpoint_async: bool = Field(False, description="Asynchronous checkpoint: only the "
                                   "GPU-to-host copy stalls.")

    def spec(self) -> ScaleEffects:
        return ScaleEffects(**self.model_dump())


class TrainMemory(Group):
    """What part of each GPU's memory a plan may fill (perfcast.train.MemoryBudget): the
    bytes the CUDA allocator can get on the device (its measured total, not the marketed
    capacity), less a reserve for the caching allocator's fragmentation."""

    allocator_reserve: float = Field(0.0, ge=0.0, le=0.9, description="Fraction of the "
                                     "CUDA-visible memory the caching allocator holds but "
                                     "cannot hand out (fragmentation); default 0, as with "
                                     "expandable segments (PyTorch's default allocator: ~0.15 "
                                     "under recomputation/ZeRO, GMLake 2024).")

    def spec(self) -> MemoryBudget:
        from perfcast.train import MemoryBudget

        return MemoryBudget(allocator_reserve=self.allocator_reserve)


class TrainKernels(KernelChoice):
    """The kernel model of a training forecast (the stack, `--stack`, routes and scales it)."""


class TrainOutputs(Group):
    """Files the request asks for besides its payload (never overwritten)."""

    trace_out: Path | None = Field(None, description="Write a Chrome-trace/Perfetto JSON of "
                                   "the iteration here (per stage: forward/backward "
                                   "micro-batches, p2p receives; then gradient reduction, "
                                   "optimizer).")


class TrainRequest(Request):
    """Time, tokens/s, MFU, memory per GPU and where the time goes of one training iteration
    (or the fastest plans that fit, or an RLHF PPO step, or a ResNet's DDP iteration)."""

    command = "train"
    model: ModelChoice = ModelChoice()
    hardware: Hardware = Hardware()
    network: NetworkOptions = NetworkOptions()
    plan: TrainPlan = TrainPlan()
    workload: TrainWorkload = TrainWorkload()
    recipe: TrainRecipe = TrainRecipe()
    search: PlanSearch = PlanSearch()
    rlhf_step: RLHFOptions = RLHFOptions()
    scale: TrainScale = TrainScale()
    memory: TrainMemory = TrainMemory()
    kernels: TrainKernels = TrainKernels()
    stack: StackChoice = StackChoice()
    allow_oom: bool = Field(False, description="Print the forecast of a plan that does not "
                            "fit in memory (with fits: false and the memory breakdown) "
                            "instead of refusing it.")
    outputs: TrainOutputs = TrainOutputs()


# --- resolved questions -------------------------------------------------------------------

@dataclass(frozen=True)
class ResolvedTrain:
    """One LLM training iteration: the job and the kernel model that prices it."""

    request: TrainRequest
    job: TrainJob
    time_model: ExecutionTimeModel
    inputs: dict[str, Any]

    def execute(self) -> TrainResult:
        from perfcast.train import forecast_training

        fc = forecast_training(self.job, time_model=self.time_model)
        _check_fits(fc, self.job.cluster, self.request.allow_oom)
        result = TrainResult(self.request, self.inputs, fc, self.job, self.time_model)
        trace_out = self.request.outputs.trace_out
        if trace_out is not None:
            from perfcast.report import training_trace

            with writing(trace_out, "trace_out"):
                trace_out.write_text(json.dumps(training_trace(result.schedule())))
        return result


@dataclass(frozen=True)
class ResolvedTrainSweep:
    """The plan search: every layout of `num_gpus` GPUs for one model and batch."""

    request: TrainRequest
    model: ModelSpec
    machines: Cluster
    num_gpus: int
    global_batch: int
    precision: Precision
    time_model: ExecutionTimeModel
    inputs: dict[str, Any]
    overlap: CommOverlap
    pipeline_sharding: bool
    graph: EagerGraph | None

    def execute(self) -> TrainSweepResult:
        from perfcast.train import sweep_plans

        w, r = self.request.workload, self.request.recipe
        table = sweep_plans(self.model, self.machines, seq_len=w.seq_len,
                            global_batch=self.global_batch, num_gpus=self.num_gpus,
                            precision=self.precision, lora_rank=r.lora_rank,
                            expert_skew=r.expert_skew, time_model=self.time_model,
                            memory_policy=self.inputs["memory_policy"], overlap=self.overlap,
                            memory_budget=self.request.memory.spec(),
                            pipeline_sharding=self.pipeline_sharding, graph=self.graph)
        return TrainSweepResult(self.request, self.inputs, table, self.request.search.top)


@dataclass(frozen=True)
class ResolvedRLHF:
    """One PPO step of `prompts` prompts, the actor trained with `plan`."""

    request: TrainRequest
    model: ModelSpec
    machines: Cluster
    plan: ParallelPlan
    prompts: int
    precision: Precision
    time_model: ExecutionTimeModel
    inputs: dict[str, Any]

    def execute(self) -> RLHFResult:
        from perfcast.train import rlhf_step

        q, w = self.request.rlhf_step, self.request.workload
        step = rlhf_step(self.model, self.machines, prompts=self.prompts,
                         prompt_tokens=w.seq_len, response_tokens=q.response_tokens,
                         plan=self.plan, micro_batch=w.micro_batch,
                         generation_tp=q.generation_tp, precision=self.precision,
                         recompute=self.request.recipe.recompute, time_model=self.time_model)
        _check_fits(step.actor, self.machines, self.request.allow_oom)
        return RLHFResult(self.request, self.inputs, step)


@dataclass(frozen=True)
class ResolvedCNNTrain:
    """One DDP iteration of a torchvision ResNet."""

    request: TrainRequest
    model: str
    machines: Cluster
    num_gpus: int
    dtype: str
    time_model: ExecutionTimeModel
    inputs: dict[str, Any]

    def execute(self) -> CNNTrainResult:
        from perfcast.train import forecast_cnn_training

        w = self.request.workload
        fc = forecast_cnn_training(self.model, self.machines, self.num_gpus, w.micro_batch,
                                   w.global_batch, self.dtype, self.time_model)
        return CNNTrainResult(self.request, self.inputs, fc)


Resolved = ResolvedTrain | ResolvedTrainSweep | ResolvedRLHF | ResolvedCNNTrain


def resolve_train(request: TrainRequest) -> Resolved:
    """Which question the request asks, with its specs and every default chosen."""
    from perfcast.ops import CNN_MODELS
    from perfcast.train import RECOMPUTE, STACKS, TrainJob, stack_time_model, training_precision

    cnn = request.model.name in CNN_MODELS
    sweep, rlhf = request.search.sweep, request.rlhf_step.rlhf
    if sweep and rlhf:
        raise InputError("rlhf", "--sweep searches plans of one training iteration, not of an "
                         "RLHF step", "--sweep or --rlhf, not both")
    _check_trace_out(request.outputs.trace_out, sweep or rlhf or cnn)
    _check_unused(request, cnn)
    recipe, w = request.recipe, request.workload
    if recipe.recompute not in RECOMPUTE:
        raise InputError("recompute", f"unknown {recipe.recompute!r}", RECOMPUTE)
    dp, gpus = request.plan.layout()
    machines = request.network.apply(request.hardware.machines(gpus), gpus)
    stack = request.stack.spec("train")
    time_model, info = request.kernels.resolve(machines.device, stack)
    if cnn:
        return _resolve_cnn(request, machines, gpus, time_model, info)
    dtype = recipe.dtype or "bf16"
    spec = request.model.spec()
    precision = training_precision(parse_dtype(dtype, "dtype"))
    if STACKS.get(stack.name) is not None:  # a stack with factors fitted on its own runs
        if request.kernels.kernel_model != "calibrated" or rlhf:
            raise InputError("stack", f"{stack.name}'s factors scale the calibrated kernel "
                             "model of a training forecast", "another --stack, or "
                             "--kernel-model calibrated without --rlhf")
        time_model = stack_time_model(stack.name, machines.device, time_model)
    batch = w.micro_batch * dp if w.global_batch is None else w.global_batch
    chosen = recipe.memory_policy
    if chosen is None and request.stack.stack is not None and not rlhf:
        chosen = stack.training_memory  # the named stack's model-state dtypes
    policy = _memory_policy(chosen, precision, rlhf)
    graph = _graph(stack, spec, rlhf, policy, precision)
    info.update(_graph_scope(stack, graph))
    budget = request.memory.spec()
    budget.check(machines.device)
    inputs = {"model": spec.name, "gpu": machines.device.name, "num_gpus": gpus,
              "seq_len": w.seq_len, "global_batch": batch, "dtype": dtype,
              "memory_policy": policy, "memory_budget": budget.describe(machines.device),
              "kernel_model": info, **_network_inputs(request, machines)}
    if sweep:
        return ResolvedTrainSweep(request, spec, machines, gpus, batch, precision, time_model,
                                  inputs, _overlap(stack, request.plan, searched=True),
                                  stack.pipeline_sharding, graph)
    plan = request.plan.spec(dp, recipe.expert_skew)
    _check_pipeline_sharding(plan, stack)
    inputs.update(plan.model_dump(mode="json"), micro_batch=w.micro_batch,
                  recompute=recipe.recompute, lora_rank=recipe.lora_rank)
    if rlhf:
        option = request.first_given("tp_comm_overlap", "overlap_param_gather")
        if option is not None:  # the PPO step's training phases hide nothing (RLHFForecast)
            raise InputError(option, "an RLHF step prices its training phases without "
                             "communication overlap options", f"omit --{option.replace('_', '-')} "
                             "with --rlhf")
        q = request.rlhf_step
        inputs.update(response_tokens=q.response_tokens, generation_tp=q.generation_tp)
        return ResolvedRLHF(request, spec, machines, plan, batch, precision, time_model, inputs)
    job = TrainJob(model=spec, cluster=machines, plan=plan, seq_len=w.seq_len,
                   micro_batch=w.micro_batch, global_batch=batch, precision=precision,
                   recompute=recipe.recompute, lora_rank=recipe.lora_rank,
                   memory_policy=policy, scale=request.scale.spec(),
                   overlap=_overlap(stack, request.plan), memory_budget=budget, graph=graph)
    inputs["overlap"] = job.overlap.model_dump(mode="json")
    if not job.scale.off:
        inputs["scale"] = job.scale.model_dump(mode="json")
    return ResolvedTrain(request, job, time_model, inputs)


def _graph(stack: Stack, model: ModelSpec, rlhf: bool, policy: str,
           precision: Precision) -> EagerGraph | None:
    """The eager op table of a stack that trains the HF module graph (Stack.training_graph),
    under autocast when the memory policy runs fp32 parameters under torch.autocast
    (torch-amp) at a 16-bit dtype; None: the Megatron-style table (other stacks, RLHF's PPO
    step, MoE models)."""
    from perfcast.compose import EagerGraph
    from perfcast.train import memory_policy as memory_policy_preset

    if stack.training_graph != "eager" or rlhf or model.moe is not None:
        return None
    autocast = (memory_policy_preset(policy).autocast
                and bytes_per_element(precision.activations) < 4)
    graph = EagerGraph(attention="sdpa" if stack.attention.fused else "eager",
                       fused=bool(stack.fused), autocast=autocast)
    if stack.host.train_dispatch_s is None:  # no measured training host: no host queue
        return graph
    host = engine_host(stack, None, None, training=True)
    return graph.model_copy(update={"host_dispatch_s": host.dispatch_s,
                                    "host_step_s": host.step_s})


def _graph_scope(stack: Stack, graph: EagerGraph | None) -> dict[str, str]:
    """What the kernel-model info says of the op table priced."""
    if graph is None:
        info = {"op_graph": "megatron"}
        if not (stack.fused and stack.attention.fused):
            info["scope"] = (f"`train` prices a Megatron-style op table (fused attention, "
                             f"norms and activations); {stack.name} changes its kernel "
                             "sources and memory policy only: its own eager graph is "
                             f"`perfcast step --mode training --stack {stack.name}`")
        return info
    amp = "; autocast over fp32 parameters" if graph.autocast else ""
    host = (f"; host {graph.host_dispatch_s * 1e6:.1f} us per kernel" if graph.host_dispatch_s
            else "; no host model")
    return {"op_graph": f"eager ({graph.attention} attention{amp}{host})",
            "scope": (f"{stack.name}'s eager HF graph (`perfcast step --mode training`'s "
                      "table) for plans of tensor parallelism only; plans with sequence or "
                      "context parallelism or LoRA get the Megatron-style table")}


def _network_inputs(request: TrainRequest, machines: Cluster) -> dict[str, Any]:
    """{"network": what was priced} where the request described the network, else {}."""
    if not request.network.network_options():
        return {}
    return {"network": network_summary(machines)}


def _overlap(stack: Stack, plan: TrainPlan, searched: bool = False) -> CommOverlap:
    """What hiding collectives costs under `stack`: a fitted profile's overlap loss (plus
    SM contention), SM contention alone for every other stack; TP overlap as asked (for
    every plan with tp > 1 the search tries, when `searched`)."""
    from perfcast.train import STACKS, CommOverlap, stack_overlap

    if plan.tp_comm_overlap and plan.tp == 1 and not searched:
        raise InputError("tp_comm_overlap", "there is no TP communication to overlap at "
                         "tp=1", "--tp > 1, or no --tp-comm-overlap")
    if plan.overlap_param_gather and plan.zero not in (1, 2) and not searched:
        raise InputError("overlap_param_gather", f"ZeRO-{plan.zero} has no post-step "
                         "parameter all-gather", "--zero 1 or 2, or no --overlap-param-gather")
    base = stack_overlap(stack.name) if STACKS.get(stack.name) is not None else CommOverlap()
    return base.model_copy(update={"tp_comm_overlap": plan.tp_comm_overlap,
                                   "param_gather_overlap": plan.overlap_param_gather})


def _check_pipeline_sharding(plan: ParallelPlan, stack: Stack) -> None:
    """ZeRO-2/3 inside pipeline stages only where the stack does it (Stack.pipeline_sharding:
    FSDP2 under torchtitan; Megatron-Core and DeepSpeed shard only optimizer state there)."""
    if plan.pp > 1 and plan.zero_stage > 1 and not stack.pipeline_sharding:
        able = [s for s in stack_names() if get_stack(s).pipeline_sharding]
        raise InputError("zero", f"ZeRO-{plan.zero_stage} with pp={plan.pp}: {stack.name} "
                         "shards only the optimizer state across pipeline stages",
                         ["0 or 1 with --pp > 1", *(f"--stack {s}" for s in able)])


def _memory_policy(name: str | None, precision: Precision, rlhf: bool) -> str:
    """The memory policy preset's name (None: the default), checked against the dtype; the
    RLHF step keeps its own accounting, so a policy is refused there."""
    from perfcast.train import memory_policy as memory_policy_preset

    policy = memory_policy_preset(name)
    if rlhf and name is not None:
        raise InputError("memory_policy", "the RLHF step keeps amp model states",
                         "omit --memory-policy with --rlhf")
    policy.check(precision)
    return policy.name


def _resolve_cnn(request: TrainRequest, machines: Cluster, gpus: int,
                 time_model: ExecutionTimeModel, info: dict[str, Any]) -> ResolvedCNNTrain:
    """A ResNet trains data-parallel only: options only transformers take are refused."""
    model, defaults = request.model.name, TrainRequest.option_defaults()
    option = request.first_given(*_DDP_ONLY)
    if option is not None:
        raise InputError(option, f"{model} trains data-parallel only (PyTorch DDP)",
                         f"{defaults[option]!r} (the default) for a CNN")
    w, dtype = request.workload, request.recipe.dtype or "fp32"
    inputs = {"model": model, "gpu": machines.device.name, "num_gpus": gpus,
              "micro_batch": w.micro_batch,
              "global_batch": (w.micro_batch * gpus if w.global_batch is None
                               else w.global_batch), "dtype": dtype,
              "kernel_model": info, **_network_inputs(request, machines)}
    return ResolvedCNNTrain(request, model, machines, gpus, dtype, time_model, inputs)


def _check_unused(request: TrainRequest, cnn: bool) -> None:
    """An option the asked question does not read is refused, never silently ignored:
    `--top` without `--sweep`, RLHF's options without `--rlhf`, a plan with `--sweep`
    (which searches every plan) and LoRA with `--rlhf` (full fine-tuning of the actor)."""
    switches = {"sweep": request.search.sweep, "rlhf": request.rlhf_step.rlhf}
    for switch, options in _ONLY_WITH:
        option = request.first_given(*options)
        if option is not None and not switches[switch]:
            raise InputError(option, f"only applies with --{switch}",
                             f"--{switch}, or omit --{option.replace('_', '-')}")
    option = request.first_given(*_SWEPT) if switches["sweep"] and not cnn else None
    if option is not None:
        raise InputError(option, "--sweep searches every plan; this option would be ignored",
                         f"--sweep without --{option.replace('_', '-')}, or a plan without "
                         "--sweep")
    option = request.first_given(*TrainScale.model_fields) if not cnn else None
    if option is not None and (switches["sweep"] or switches["rlhf"]):
        raise InputError(option, "scale effects apply to one LLM training iteration",
                         f"omit --{option.replace('_', '-')} with --sweep or --rlhf")
    if switches["rlhf"] and request.first_given("allocator_reserve") is not None:
        raise InputError("allocator_reserve", "the RLHF step checks its actor against the "
                         "device's CUDA-visible memory", "omit --allocator-reserve with --rlhf")
    if switches["rlhf"] and request.recipe.lora_rank is not None:
        raise InputError("lora_rank", "the RLHF step trains the full actor and critic",
                         "omit --lora-rank with --rlhf")


def _check_trace_out(trace_out: Path | None, other_mode: bool) -> None:
    """--trace-out traces one LLM training iteration, into a new file."""
    if trace_out is None:
        return
    if other_mode:
        raise InputError("trace_out", "traces one LLM training iteration", "omit it with "
                         "--sweep, --rlhf or a CNN model")
    check_output_file(trace_out, "trace_out")


def _check_fits(fc: TrainForecast, machines: Cluster, allow_oom: bool) -> None:
    """A plan whose memory per GPU exceeds what its MemoryBudget lets it fill is refused
    unless `allow_oom` (then the forecast says fits=False)."""
    if not fc.fits and not allow_oom:
        raise InputError("memory", f"needs {fc.memory_per_gpu_bytes / 1e9:.1f} GB per GPU ("
                         + ", ".join(f"{k} {v / 1e9:.1f}" for k, v in fc.memory.items())
                         + f") but {machines.device.name} gives the allocator "
                         f"{fc.capacity_bytes / 1e9:.1f} GB", _FIT_HINT)


# --- results ------------------------------------------------------------------------------

@dataclass(frozen=True)
class TrainResult:
    """One LLM iteration: the forecast, and the job and kernel model behind it."""

    request: TrainRequest
    inputs: dict[str, Any]
    forecast: TrainForecast
    job: TrainJob
    time_model: ExecutionTimeModel

    def schedule(self) -> TrainSchedule:
        """Every pipeline task's simulated start and end (the `--trace-out` timeline)."""
        from perfcast.report import training_schedule

        return training_schedule(self.job, time_model=self.time_model, forecast=self.forecast)

    def payload(self) -> dict[str, Any]:
        return {"perfcast_version": __version__, "inputs": self.inputs,
                **self.forecast.as_dict()}


@dataclass(frozen=True, eq=False)
class TrainSweepResult:
    """The plan search: every plan searched (`plans`), the `top` fastest that fit."""

    request: TrainRequest
    inputs: dict[str, Any]
    plans: pd.DataFrame = field(repr=False)
    top: int

    @property
    def fitting(self) -> pd.DataFrame:
        """The fastest `top` plans that fit in memory."""
        return self.plans[self.plans["fits"]].head(self.top)

    def payload(self) -> dict[str, Any]:
        return {"perfcast_version": __version__, "inputs": self.inputs,
                "plans_searched": len(self.plans),
                "plans_fitting": int(self.plans["fits"].sum()),
                "top": self.fitting.to_dict("records")}


@dataclass(frozen=True)
class RLHFResult:
    """One RLHF PPO step: seconds per phase and the actor's and critic's iterations."""

    request: TrainRequest
    inputs: dict[str, Any]
    step: RLHFForecast

    def payload(self) -> dict[str, Any]:
        return {"perfcast_version": __version__, "inputs": self.inputs, **self.step.as_dict()}


@dataclass(frozen=True)
class CNNTrainResult:
    """One DDP iteration of a ResNet."""

    request: TrainRequest
    inputs: dict[str, Any]
    forecast: CNNTrainForecast

    def payload(self) -> dict[str, Any]:
        return {"perfcast_version": __version__, "inputs": self.inputs,
                **self.forecast.as_dict()}


def execute_train(resolved: Resolved) -> TrainResult | TrainSweepResult | RLHFResult | (
        CNNTrainResult):
    return resolved.execute()


register(TrainRequest, resolve_train, execute_train)
