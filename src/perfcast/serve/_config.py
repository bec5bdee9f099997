"""What deployment to simulate: model, hardware, parallelism, scheduler, KV cache and router,
as one frozen, validated object. Every bad value is an InputError naming its field.

Attention heads over TP, as the engines split them (`ServeConfig._check_heads`):

- Query heads must divide by TP in all three engines, none pads them: vLLM refuses at
  start-up (`ModelConfig.verify_with_parallel_config`: "Total number of attention heads
  must be divisible by tensor parallel size"), SGLang's `QKVParallelLinear` (vLLM's) calls
  `divide(total_num_heads, tp_size)`, TensorRT-LLM's `Attention` asserts
  `num_heads % tp_size == 0` (tensorrt_llm/_torch/modules/attention.py).
- KV heads fewer than TP are replicated: each rank holds one, `tp / kv` ranks share it (vLLM
  and SGLang `QKVParallelLinear`: `num_kv_head_replicas = divide(tp_size,
  total_num_kv_heads)`, which needs tp a multiple of kv; TensorRT-LLM
  `(num_key_value_heads + tp_size - 1) // tp_size`, i.e. ceil). perfcast follows vLLM and
  SGLang: tp a multiple of the KV heads (the KV cache counts one head per rank,
  `ops.kv_bytes_per_token`); TensorRT-LLM's ceil for other TPs is not modelled.
- KV heads more than TP: kv / tp per rank, so TP divides them (all three).
- MLA (DeepSeek) caches one latent per token, replicated on every TP rank: no KV-head rule.
- With attention data parallelism `tp` is the attention TP (TensorRT-LLM's
  `enable_attention_dp` runs attention at TP 1; SGLang's DP attention at tp / dp).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from perfcast.compose import HOST_PROFILES, Execution
from perfcast.errors import InputError, from_validation_error
from perfcast.specs import (
    Cluster,
    Device,
    KVBudget,
    ModelSpec,
    ParallelPlan,
    Precision,
    cluster_for,
    get_cluster,
    get_device,
    get_model,
    get_stack,
)

__all__ = ["DEFAULT_EXPERT_SKEW", "DEFAULT_MAX_MODEL_LEN", "PAGED", "ROUTERS", "SCHEDULERS",
           "SERVE_KERNEL_MODELS", "ServeConfig"]

SCHEDULERS = ("vllm-v0", "vllm-v1", "sarathi", "prefill-first", "orca", "static")
# Schedulers that page the KV cache (prefix caching, speculative decoding need one)
PAGED = ("vllm-v0", "vllm-v1", "sarathi", "prefill-first")
# Engine fields a stack's EngineDefaults fills when the user leaves them unset
ENGINE_DEFAULTED = ("scheduler", "max_batch", "max_batch_tokens")
GENERIC_SCHEDULER, GENERIC_MAX_BATCH = "vllm-v0", 256  # without a stack's engine defaults
# Schedulers whose one token budget holds every running decode's tokens as well as prefills
DECODES_IN_BUDGET = ("vllm-v1", "sarathi")
# Kernel models serving prices with: the roofline is left out (`perfcast infer` has it), as
# serving's step grids, draft models and pools were validated against measured kernels only.
SERVE_KERNEL_MODELS = ("calibrated", "learned")
ROUTERS = ("round-robin", "least-outstanding", "least-kv")
# vLLM's defaults: v0 without chunking needs a prompt-sized budget; v1 (online) 8192 tokens;
# Sarathi-Serve's budget is its chunk size (512 in the paper's and Vidur's runs); SGLang's
# chunked-prefill size on 35-160 GiB GPUs is 8192 (specs/data/stacks.json, sglang).
_DEFAULT_BUDGET = {"vllm-v1": 8192, "sarathi": 512, "prefill-first": 8192}
# Most loaded EP rank / mean: AIConfigurator's power-law routing (alpha 1.01-1.2, its `moe`
# `distribution`) gives 1.3-1.9 for DeepSeek-V3 at EP8 over 64-8192 tokens; trained routers
# with balancing losses (aux loss, DeepSeek's bias) sit at or below its low end. Chosen a
# priori, not fitted on serving points.
DEFAULT_EXPERT_SKEW = 1.3
# Longest sequence when a model's config names no context length: vLLM's fallback
# (`_get_and_verify_max_len`: 2048, with a warning); the API notes when it is used.
DEFAULT_MAX_MODEL_LEN = 2048


class ServeConfig(BaseModel):
    """One serving deployment: `replicas` copies of a TP x PP group behind a router."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    model: str | ModelSpec
    gpu: str | None = Field(default=None, description="device name (or give `cluster`)")
    cluster: str | None = Field(default=None, description="cluster preset name")
    tp: int = Field(default=1, ge=1)
    pp: int = Field(default=1, ge=1)
    replicas: int = Field(default=1, ge=1)
    scheduler: Literal["vllm-v0", "vllm-v1", "sarathi", "prefill-first", "orca", "static"] = (
        Field(default=GENERIC_SCHEDULER, description="batch scheduler; None or unset: the "
              "stack's engine default (Stack.engine), else vllm-v0"))
    max_batch: int = Field(default=GENERIC_MAX_BATCH, ge=1, description="max sequences per "
                           "step; None or unset: the stack engine's default, else 256")
    max_batch_tokens: int | None = Field(default=None, ge=1, description="token budget/step")
    chunk_size: int | None = Field(default=None, ge=1, description="prefill chunk (tokens)")
    block_size: int = Field(default=16, ge=1, le=1024, description="KV tokens per block")
    gpu_memory_utilization: float = Field(default=0.9, gt=0.0, le=1.0, description="the "
                                          "engine's memory fraction, a share of what "
                                          "kv_budget says (perfcast.specs.KVBudget)")
    kv_budget: KVBudget | None = Field(
        default=None, description="what gpu_memory_utilization is a share of: the CUDA total "
        "(vLLM, SGLang) or what the model leaves free (TensorRT-LLM); None: the stack's rule "
        "(vLLM's without a stack)")
    watermark: float = Field(default=0.01, ge=0.0, lt=1.0, description="free-block fraction "
                             "kept when admitting")
    preemption: Literal["recompute", "swap"] = "recompute"
    swap_space_gb: float = Field(default=4.0, ge=0.0, description="host swap per GPU, GB")
    router: Literal["round-robin", "least-outstanding", "least-kv"] = "round-robin"
    execution: Literal["cuda-graph", "eager"] = "cuda-graph"
    precision: Precision = Field(default_factory=Precision)
    host: str = "vllm-v0"
    stack: str | None = Field(default=None, description="software stack whose kernel tables "
                              "price the steps (perfcast.specs.get_stack); None: the shipped "
                              "calibration alone")
    kernel_model: Literal["calibrated", "learned"] = Field(
        default="calibrated", description="kernel times: the calibrated physical model, or "
        "the learned trees inside their envelope over it (issue 18); every step model of the "
        "deployment (draft, pools, co-located models) prices with it")
    prefill_dispatch_s: float | None = Field(
        default=None, ge=0.0, le=1e-3, description="host seconds per kernel of a step with "
        "prefill tokens, which the engine dispatches from Python while CUDA graphs replay "
        "its decode-only steps (execution cuda-graph); None: the stack's "
        "(Stack.host.prefill_dispatch_s), 0 without a stack")
    host_speed: float = Field(default=1.0, gt=0.0, le=100.0, description="this host's CPU "
                              "against the reference CPU of the host costs (host profile, "
                              "prefill dispatch): they are divided by it")
    host_overlap: bool = Field(default=False, description="the engine prepares the next step "
                               "on the CPU while the GPU runs this one (step = max, not sum; "
                               "first tokens reach the client when the next step ends)")
    max_context: int | None = Field(default=None, ge=1, description="longest sequence "
                                    "(prompt + output; vLLM's max_model_len); None: the "
                                    "model's max_position_embeddings")
    prefix_caching: bool = Field(default=False, description="reuse cached KV blocks of "
                                 "shared prompt content across requests (vLLM automatic prefix "
                                 "caching, SGLang RadixAttention)")
    spec_k: int = Field(default=0, ge=0, le=16, description="speculative decoding: draft "
                        "tokens proposed per step (0: off)")
    spec_draft_model: str | None = Field(default=None, description="draft model (catalog "
                                         "name); None: draft-free (n-gram / self-speculation)")
    spec_acceptance: float | tuple[float, ...] = Field(
        default=0.7, description="per-token acceptance rate, or one rate per draft position")
    spec_draft_gpu: Literal["shared", "separate"] = Field(
        default="shared", description="draft model on the target's GPUs (its weights and KV "
        "take memory) or on GPUs of its own")
    allreduce: Literal["custom", "nccl"] = Field(
        default="custom", description="TP all-reduce: the engines' one-shot custom kernel on "
        "NVLink where faster (vLLM, SGLang, TensorRT-LLM default), or NCCL's ring only")

    ep: int = Field(default=1, ge=1, description="expert-parallel degree of MoE layers: "
                    "experts split over ep ranks (x moe_tp = tp x attention_dp)")
    moe_tp: int | None = Field(default=None, ge=1, description="tensor-parallel degree of "
                               "each expert; None: tp x attention_dp / ep with EP, tp "
                               "without (the only split modelled; given, it must equal it)")
    attention_dp: int = Field(default=1, ge=1, description="attention data-parallel ranks "
                              "sharing one EP group (DeepSeek-style): each is a replica with "
                              "its own requests and KV; their tokens meet in the MoE layers")
    expert_skew: float = Field(default=DEFAULT_EXPERT_SKEW, ge=1.0, le=64.0, description=(
        "routed tokens of the most loaded EP rank / the mean rank's; MoE layers wait on it"))

    _resolved: tuple[ModelSpec, Cluster] = PrivateAttr()
    _from_stack: tuple[str, ...] = PrivateAttr(default=())

    def __init__(self, **data: Any):
        data, filled = _engine_defaults(data)
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise from_validation_error(exc, default="config") from None
        self._from_stack = filled
        self._resolve()

    @property
    def engine_defaults(self) -> dict[str, Any]:
        """Which engine fields came from the stack's engine defaults, and their source."""
        if not self._from_stack:
            return {}
        engine = get_stack(self.stack).engine
        return {"from_stack": list(self._from_stack), "provenance": engine.provenance}

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
        if self.stack is not None:
            get_stack(self.stack)  # an unknown name fails here, naming the field
        if (self.gpu is None) == (self.cluster is None):
            raise InputError("gpu", "give exactly one of gpu and cluster")
        self._check_heads(model)
        self._check_experts(model)
        n = self.tp * self.pp * self.attention_dp
        cluster = (get_cluster(self.cluster, n) if self.cluster
                   else cluster_for(get_device(self.gpu), n))
        self.plan.check(model)
        self._resolved = (model, cluster)
        budget, seqs = self.token_budget, self.max_batch * (1 + self.spec_k)
        if self.scheduler in DECODES_IN_BUDGET and budget < seqs:
            field = "chunk_size" if self.scheduler == "sarathi" else "max_batch_tokens"
            raise InputError(field, f"token budget {budget} must be >= max_batch x (1 + "
                             f"spec_k) = {seqs} so every running decode fits a step",
                             f">= {seqs}")
        Execution(self.execution)
        self._check_spec(model)
        if self.prefix_caching and (self.scheduler not in PAGED
                                    or self.preemption != "recompute"):
            raise InputError("prefix_caching", "is modelled for the paged schedulers with "
                             f"preemption by recompute (got scheduler={self.scheduler!r}, "
                             f"preemption={self.preemption!r})",
                             f"scheduler {', '.join(PAGED)} with preemption recompute")
        if self.scheduler == "prefill-first" and self.preemption != "recompute":
            raise InputError("preemption", "prefill-first (SGLang) retracts requests by "
                             "recompute; swapping is modelled for vllm-v0", "recompute")

    def _check_heads(self, model: ModelSpec) -> None:
        """TP splits the attention heads as the engines do (module docstring)."""
        tp, heads, kv = self.tp, model.num_heads, model.num_kv_heads
        if heads % tp:
            raise InputError("tp", f"{tp} does not divide {model.name}'s {heads} query heads; "
                             "vLLM, SGLang and TensorRT-LLM all refuse it (none pads query "
                             "heads)", _divisors(heads))
        if model.mla is not None:
            return
        if tp > kv and tp % kv:
            raise InputError("tp", f"{tp} is above {model.name}'s {kv} KV heads but not a "
                             "multiple of them: vLLM and SGLang replicate each KV head on "
                             "tp / kv ranks and refuse this (TensorRT-LLM's ceil(kv / tp) "
                             "split is not modelled)",
                             [d for d in _divisors(heads) if d <= kv or d % kv == 0])
        if kv > tp and kv % tp:
            raise InputError("tp", f"{tp} does not divide {model.name}'s {kv} KV heads "
                             "(each rank holds kv / tp of them)", _divisors(kv))

    def _check_experts(self, model: ModelSpec) -> None:
        """EP and attention-DP degrees that split this model and fill whole EP groups; an
        explicit moe_tp sets the experts' TP split (ParallelPlan.expert_tp), moe_tp x ep
        filling the tp x attention_dp ranks."""
        dp, ep = self.attention_dp, self.ep
        if self.moe_tp is not None:
            self._check_moe_tp(model)
        if dp > 1 and ep == 1 and self.plan.moe_tp != self.tp * dp:
            raise InputError("attention_dp", f"{dp} needs ep > 1 or moe_tp = tp x attention_dp "
                             f"({self.tp * dp}): else the ranks are independent replicas",
                             "1, or set ep or moe_tp")
        if (self.tp * dp) % ep:
            raise InputError("ep", f"{ep} must divide tp x attention_dp ({self.tp * dp}): "
                             "each rank holds ep-th of the experts", [
                                 d for d in range(1, self.tp * dp + 1) if self.tp * dp % d == 0])
        if self.replicas % dp:
            raise InputError("replicas", f"{self.replicas} must be a multiple of attention_dp "
                             f"({dp}): each attention rank is a replica",
                             f"{dp}, {2 * dp}, ...")

    def _check_moe_tp(self, model: ModelSpec) -> None:
        ranks = self.tp * self.attention_dp
        if self.moe_tp * self.ep != ranks:
            raise InputError("moe_tp", f"moe_tp x ep = {self.moe_tp} x {self.ep} must equal tp "
                             f"x attention_dp = {ranks}: every GPU holds one expert shard",
                             f"{ranks // self.ep} with ep {self.ep}")

    def _check_spec(self, model: ModelSpec) -> None:
        rates = self.spec_rates
        if any(not 0.0 <= a <= 1.0 for a in rates) or (
                self.spec_k and not isinstance(self.spec_acceptance, float | int)
                and len(self.spec_acceptance) != self.spec_k):
            raise InputError("spec_acceptance", f"needs one rate in [0, 1] or spec_k={self.spec_k}"
                             f" of them, got {self.spec_acceptance!r}", "rates in [0, 1]")
        if not self.spec_k:
            if self.spec_draft_model is not None:
                raise InputError("spec_k", "a draft model needs spec_k >= 1", ">= 1")
            return
        if self.scheduler not in ("vllm-v0", "vllm-v1", "sarathi") or self.pp != 1 \
                or self.execution != "cuda-graph" or model.sliding_window is not None:
            raise InputError("spec_k", "speculative decoding is modelled for the paged "
                             "schedulers (vllm-v0, vllm-v1, sarathi), pp=1, CUDA graphs and "
                             "models without sliding-window attention")
        if self.spec_draft_model is not None:
            get_model(self.spec_draft_model)  # unknown names: InputError with close matches

    @property
    def spec_rates(self) -> tuple[float, ...]:
        """Acceptance rate of each draft position (empty when speculation is off)."""
        a = self.spec_acceptance
        rates = (float(a),) * self.spec_k if isinstance(a, float | int) else tuple(a)
        return rates[:self.spec_k]

    # -- derived ------------------------------------------------------------------------
    @property
    def model_spec(self) -> ModelSpec:
        return self._resolved[0]

    @property
    def budget_rule(self) -> KVBudget:
        """What gpu_memory_utilization is a share of: kv_budget, else the stack's rule
        (vLLM's without a stack)."""
        if self.kv_budget is not None:
            return self.kv_budget
        return KVBudget.TOTAL if self.stack is None else get_stack(self.stack).kv_budget

    @property
    def prefill_dispatch(self) -> float:
        """Host seconds per kernel of a prefill step on the reference CPU: prefill_dispatch_s,
        else the stack's (0 without a stack)."""
        if self.prefill_dispatch_s is not None:
            return self.prefill_dispatch_s
        return 0.0 if self.stack is None else get_stack(self.stack).host.prefill_dispatch_s

    @property
    def cluster_spec(self) -> Cluster:
        """The cluster one replica (tp x pp GPUs; x attention_dp for the EP group that
        attention-DP replicas share) runs on."""
        return self._resolved[1]

    @property
    def plan(self) -> ParallelPlan:
        """The parallel plan; an explicit moe_tp other than the one tp, attention_dp and ep
        imply splits the experts by TP across the attention-DP ranks (ParallelPlan.expert_tp)."""
        plan = ParallelPlan(tp=self.tp, pp=self.pp, dp=self.attention_dp, ep=self.ep,
                            expert_skew=self.expert_skew)
        if self.moe_tp is None or self.moe_tp == plan.moe_tp:
            return plan
        return ParallelPlan(tp=self.tp, pp=self.pp, dp=self.attention_dp, ep=self.ep,
                            expert_skew=self.expert_skew, expert_tp=self.moe_tp)

    @property
    def context_limit(self) -> int:
        """Longest sequence (prompt + output) a request may have: max_context, else the
        model's max_position_embeddings, else DEFAULT_MAX_MODEL_LEN (vLLM's fallback)."""
        m = self.model_spec
        return self.max_context or m.max_position_embeddings or DEFAULT_MAX_MODEL_LEN

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
        if self.scheduler in ("sarathi", "vllm-v1", "prefill-first"):
            return self.chunk_size or self.token_budget
        return None


def _engine_defaults(data: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """`data` with the engine fields the user left unset (or None) taken from its stack's
    EngineDefaults, for the tier of its GPU's CUDA-visible memory, and the names filled.
    The stack's limits come as a set with its scheduler: with another scheduler named, the
    generic defaults apply (vllm-v0's prompt-sized budget, 256 sequences). With speculative
    decoding a chunking scheduler's default sequences are capped at budget / (1 + spec_k),
    so every running decode's verified tokens fit a step (ServeConfig refuses less)."""
    unset = {k for k in ENGINE_DEFAULTED if data.get(k) is None}
    data = {k: v for k, v in data.items() if k not in unset}
    stack = data.get("stack")
    engine = get_stack(stack).engine if isinstance(stack, str) else None
    if engine is None or data.get("scheduler", engine.scheduler) != engine.scheduler \
            or not unset:
        return data, ()
    device = _device_of(data)
    if device is None:
        return data, ()
    tier = engine.tier_on(device)
    budget = data.get("max_batch_tokens") or tier.max_batch_tokens
    seqs = tier.max_seqs
    if engine.scheduler in DECODES_IN_BUDGET:  # each running decode's verified tokens
        seqs = min(seqs, budget // (1 + int(data.get("spec_k") or 0)))  # fit one step
    values = {"scheduler": engine.scheduler, "max_batch": seqs,
              "max_batch_tokens": tier.max_batch_tokens}
    filled = tuple(k for k in ENGINE_DEFAULTED if k in unset)
    return {**data, **{k: values[k] for k in filled}}, filled


def _device_of(data: dict[str, Any]) -> Device | None:
    """The GPU named by `gpu` or `cluster` (None when neither or both: _resolve refuses)."""
    gpu, cluster = data.get("gpu"), data.get("cluster")
    if isinstance(gpu, str) and cluster is None:
        return get_device(gpu)
    if isinstance(cluster, str) and gpu is None:
        return get_cluster(cluster, 1).device
    return None


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]
