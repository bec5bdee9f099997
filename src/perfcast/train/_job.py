"""What one training iteration runs: model, cluster, parallel plan, batch shape, precision,
recomputation and LoRA, as one frozen, validated object. Every bad value is an InputError
naming its field."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perfcast.compose import EagerGraph
from perfcast.errors import InputError, from_validation_error
from perfcast.specs import Cluster, DType, ModelSpec, ParallelPlan, PipelineSchedule, Precision
from perfcast.train._memory import MemoryBudget
from perfcast.train._memory_policy import DEFAULT_MEMORY_POLICY, memory_policy
from perfcast.train._overlap import CommOverlap
from perfcast.train._scale import ScaleEffects

__all__ = ["RECOMPUTE", "TrainJob", "training_precision"]

RECOMPUTE = ("none", "selective", "full")
_TRAIN_DTYPES = (DType.FP32, DType.FP16, DType.BF16, DType.FP8)


def training_precision(dtype: DType | str) -> Precision:
    """Mixed precision for a GEMM dtype: fp8 runs the GEMMs in fp8 (Transformer Engine) with
    bf16 attention and everything else; 16/32-bit runs everything in that dtype."""
    dtype = DType(dtype)
    if dtype not in _TRAIN_DTYPES:
        raise InputError("dtype", f"cannot train in {dtype.value}",
                         [d.value for d in _TRAIN_DTYPES])
    if dtype == DType.FP8:
        return Precision(weights=DType.FP8, activations=DType.FP8, kv_cache=DType.BF16)
    return Precision.uniform(dtype)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


class TrainJob(BaseModel):
    """One training iteration: `global_batch` sequences of `seq_len` tokens over all DP
    ranks, `micro_batch` sequences per forward/backward pass. Each DP rank runs
    global_batch / (micro_batch x dp) micro-batches: gradient-accumulation steps, or the
    pipeline's micro-batches when pp > 1 (the plan's own `micro_batches` must agree or be 1).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: ModelSpec
    cluster: Cluster
    plan: ParallelPlan
    seq_len: int = Field(gt=0)
    micro_batch: int = Field(gt=0, description="sequences per micro-batch per DP rank")
    global_batch: int = Field(gt=0, description="sequences per iteration, all DP ranks")
    precision: Precision | None = Field(default=None, description="None: bf16 mixed precision")
    recompute: Literal["none", "selective", "full"] = "none"
    lora_rank: int | None = Field(default=None, gt=0)
    memory_policy: str = Field(default=DEFAULT_MEMORY_POLICY, description="model-state "
                               "dtypes: a perfcast.train.MEMORY_POLICIES preset name")
    scale: ScaleEffects = Field(default_factory=ScaleEffects, description="stragglers, "
                                "host time, checkpoints (perfcast.train._scale; all off)")
    overlap: CommOverlap = Field(default_factory=CommOverlap, description="what hiding "
                                 "collectives under compute costs (SM contention, the "
                                 "stack's fitted overlap loss)")
    memory_budget: MemoryBudget = Field(default_factory=MemoryBudget, description="what part "
                                        "of each GPU's memory the plan may fill (the CUDA-"
                                        "visible bytes less the allocator's reserve)")
    graph: EagerGraph | None = Field(default=None, description="None: a Megatron-style fused "
                                     "op table; else the eager HF graph the stack trains")

    def __init__(self, **data: Any):
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise from_validation_error(exc, default="job") from None
        self._check()

    def _check(self) -> None:
        plan, model = self.plan, self.model
        model.require_uniform_layers("training")
        memory_policy(self.memory_policy).check(self.precision_or_default)
        self.memory_budget.check(self.cluster.device)
        if model.kind == "encoder-decoder":
            raise InputError("model", f"{model.name} is an encoder-decoder; training is "
                             "modelled for decoder-only and encoder-only models",
                             "decoder, encoder")
        plan.check(model)
        if plan.num_gpus > self.cluster.num_gpus:
            raise InputError("plan", f"tp x pp x dp x cp = {plan.num_gpus} GPUs but the "
                             f"cluster has {self.cluster.num_gpus}",
                             f"<= {self.cluster.num_gpus} GPUs")
        per_step = self.micro_batch * plan.dp
        if self.global_batch % per_step:
            raise InputError("global_batch", f"{self.global_batch} sequences do not split "
                             f"into micro-batches of {self.micro_batch} on dp={plan.dp}",
                             f"a multiple of micro_batch x dp = {per_step}")
        m = self.micro_batches
        if plan.micro_batches not in (1, m):
            raise InputError("plan.micro_batches", f"{plan.micro_batches} disagrees with "
                             f"global_batch / (micro_batch x dp) = {m}", f"1 or {m}")
        chunks = plan.cp * (2 if plan.cp_algorithm == "ring" else 1)  # ring: load-balanced
        if plan.cp > 1 and self.seq_len % chunks:
            raise InputError("seq_len", f"{self.seq_len} does not split into {chunks} chunks "
                             f"({plan.cp_algorithm} context parallelism, cp={plan.cp})",
                             f"a multiple of {chunks}")
        self._check_pipeline(m)
        self._check_experts()
        if self.lora_rank is not None and (model.mla is not None or plan.ep > 1):
            raise InputError("lora_rank", "LoRA is modelled for q/k/v/o and MLP projections "
                             "without expert parallelism (no MLA, ep=1)", "omit lora_rank")

    def _check_pipeline(self, m: int) -> None:
        plan = self.plan
        chunks = plan.pp * plan.virtual_stages
        if chunks > self.model.num_layers:
            raise InputError("plan.virtual_stages", f"pp x virtual_stages = {chunks} exceeds "
                             f"{self.model.num_layers} layers",
                             f"<= {self.model.num_layers // plan.pp}")
        interleaved = plan.schedule == PipelineSchedule.INTERLEAVED and plan.virtual_stages > 1
        if interleaved and m % plan.pp:
            raise InputError("global_batch", f"{m} micro-batches per pipeline must be a "
                             f"multiple of pp={plan.pp} for the interleaved schedule",
                             f"global_batch a multiple of {plan.pp * self.micro_batch * plan.dp}")

    def _check_experts(self) -> None:
        plan = self.plan
        if plan.ep == 1:
            return
        ranks = plan.tp * plan.dp
        if ranks % plan.ep or (plan.ep > plan.tp and plan.ep % plan.tp):
            raise InputError("plan.ep", f"{plan.ep} must divide tp x dp = {ranks} and be a "
                             f"multiple or divisor of tp={plan.tp}", _divisors(ranks))

    # -- derived ------------------------------------------------------------------------
    @property
    def micro_batches(self) -> int:
        """Micro-batches per DP rank per iteration."""
        return self.global_batch // (self.micro_batch * self.plan.dp)

    @property
    def precision_or_default(self) -> Precision:
        return self.precision or Precision()

    @property
    def tokens(self) -> int:
        """Tokens per iteration, all GPUs."""
        return self.global_batch * self.seq_len

    @property
    def virtual_stages(self) -> int:
        """Model chunks per pipeline stage (1 unless interleaved)."""
        return self.plan.virtual_stages if self.plan.pp > 1 else 1
