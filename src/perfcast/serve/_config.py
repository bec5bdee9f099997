"""What deployment to simulate: model, hardware, parallelism, scheduler, KV cache and router,
as one frozen, validated object. Every bad value is an InputError naming its field."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from perfcast.compose import HOST_PROFILES, Execution
from perfcast.errors import InputError
from perfcast.specs import (
    Cluster,
    ModelSpec,
    ParallelPlan,
    Precision,
    cluster_for,
    get_cluster,
    get_device,
    get_model,
)

__all__ = ["ROUTERS", "SCHEDULERS", "ServeConfig"]

SCHEDULERS = ("vllm-v0", "vllm-v1", "sarathi", "orca", "static")
ROUTERS = ("round-robin", "least-outstanding", "least-kv")
# vLLM's defaults: v0 without chunking needs a prompt-sized budget; v1 (online) 8192 tokens;
# Sarathi-Serve's budget is its chunk size (512 in the paper's and Vidur's runs).
_DEFAULT_BUDGET = {"vllm-v1": 8192, "sarathi": 512}


class ServeConfig(BaseModel):
    """One serving deployment: `replicas` copies of a TP x PP group behind a router."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    model: str | ModelSpec
    gpu: str | None = Field(default=None, description="device name (or give `cluster`)")
    cluster: str | None = Field(default=None, description="cluster preset name")
    tp: int = Field(default=1, ge=1)
    pp: int = Field(default=1, ge=1)
    replicas: int = Field(default=1, ge=1)
    scheduler: Literal["vllm-v0", "vllm-v1", "sarathi", "orca", "static"] = "vllm-v0"
    max_batch: int = Field(default=256, ge=1, description="max sequences per step")
    max_batch_tokens: int | None = Field(default=None, ge=1, description="token budget/step")
    chunk_size: int | None = Field(default=None, ge=1, description="prefill chunk (tokens)")
    block_size: int = Field(default=16, ge=1, le=1024, description="KV tokens per block")
    gpu_memory_utilization: float = Field(default=0.9, gt=0.0, le=1.0)
    watermark: float = Field(default=0.01, ge=0.0, lt=1.0, description="free-block fraction "
                             "kept when admitting")
    preemption: Literal["recompute", "swap"] = "recompute"
    swap_space_gb: float = Field(default=4.0, ge=0.0, description="host swap per GPU, GB")
    router: Literal["round-robin", "least-outstanding", "least-kv"] = "round-robin"
    execution: Literal["cuda-graph", "eager"] = "cuda-graph"
    precision: Precision = Field(default_factory=Precision)
    host: str = "vllm-v0"
    host_overlap: bool = Field(default=False, description="the engine prepares the next step "
                               "on the CPU while the GPU runs this one (step = max, not sum; "
                               "first tokens reach the client when the next step ends)")
    max_context: int | None = Field(default=None, ge=1, description="longest sequence")
    allreduce: Literal["custom", "nccl"] = Field(
        default="custom", description="TP all-reduce: the engines' one-shot custom kernel on "
        "NVLink where faster (vLLM, SGLang, TensorRT-LLM default), or NCCL's ring only")

    _resolved: tuple[ModelSpec, Cluster] = PrivateAttr()

    def __init__(self, **data: Any):
        try:
            super().__init__(**data)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "config"
            raise InputError(field, err["msg"].removeprefix("Value error, ")) from None
        self._resolve()

    @field_validator("precision", mode="before")
    @classmethod
    def _precision(cls, value: Any) -> Any:
        return Precision.uniform(value) if isinstance(value, str) else value

    def _resolve(self) -> None:
        model = self.model if isinstance(self.model, ModelSpec) else get_model(self.model)
        if model.kind != "decoder":
            raise InputError("model", f"{model.name} is {model.kind}; serving needs a "
                             "decoder-only model", "decoder")
        if self.host not in HOST_PROFILES:
            raise InputError("host", f"unknown profile {self.host!r}", list(HOST_PROFILES))
        if (self.gpu is None) == (self.cluster is None):
            raise InputError("gpu", "give exactly one of gpu and cluster")
        n = self.tp * self.pp
        cluster = (get_cluster(self.cluster, n) if self.cluster
                   else cluster_for(get_device(self.gpu), n))
        self.plan.check(model)
        self._resolved = (model, cluster)
        budget, seqs = self.token_budget, self.max_batch
        if self.scheduler in ("vllm-v1", "sarathi") and budget < seqs:
            field = "chunk_size" if self.scheduler == "sarathi" else "max_batch_tokens"
            raise InputError(field, f"token budget {budget} must be >= max_batch ({seqs}) so "
                             "every running decode fits a step", f">= {seqs}")
        Execution(self.execution)

    # -- derived ------------------------------------------------------------------------
    @property
    def model_spec(self) -> ModelSpec:
        return self._resolved[0]

    @property
    def cluster_spec(self) -> Cluster:
        """The cluster one replica (tp x pp GPUs) runs on."""
        return self._resolved[1]

    @property
    def plan(self) -> ParallelPlan:
        return ParallelPlan(tp=self.tp, pp=self.pp)

    @property
    def context_limit(self) -> int:
        """Longest sequence (prompt + output) a request may have."""
        m = self.model_spec
        return self.max_context or m.max_position_embeddings or 131072

    @property
    def token_budget(self) -> int:
        """Tokens one step may process: explicit, else the scheduler's default (v0, Orca and
        static batching take whole prompts, so their default is the context limit)."""
        if self.max_batch_tokens is not None:
            return self.max_batch_tokens
        if self.scheduler == "sarathi":
            return self.chunk_size or _DEFAULT_BUDGET["sarathi"]
        return _DEFAULT_BUDGET.get(self.scheduler) or max(self.context_limit, 2048)

    @property
    def prefill_chunk(self) -> int | None:
        """Largest prefill chunk per request per step (None: whole prompts)."""
        if self.scheduler == "sarathi":
            return self.chunk_size or self.token_budget
        if self.scheduler == "vllm-v1":
            return self.chunk_size or self.token_budget
        return None
