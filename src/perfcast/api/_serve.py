"""`serve`: a serving deployment under load, simulated request by request.

One deployment (replicas of a TP x PP group behind a router), or the same load on
disaggregated prefill and decode pools (each a `PoolLayout`: workers x TP/PP/EP/attention-DP,
its own batch limits), or several models co-located on the same GPUs (each beside its
dedicated run). Requests hold up to `--max-model-len` tokens (default: the model's
max_position_embeddings); drawn or recorded lengths above it are clipped and the clip is
reported (`inputs.clipped_requests`), fixed ones refused. The result holds the simulation,
its per-request table as a DataFrame, and the payload `perfcast serve --json` prints.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator, model_validator

from perfcast import __version__
from perfcast.api._base import Group, Request, register
from perfcast.api._choices import (
    EngineStackChoice,
    Hardware,
    ServingPrecision,
    _shorthand,
    precision_spec,
)
from perfcast.api._engine_host import engine_host
from perfcast.api._units import (
    MAX_BATCH,
    MAX_GPUS,
    MAX_REQUESTS,
    MAX_TOKENS,
    TPOT_PLAIN_MAX_S,
    TTFT_PLAIN_MAX_S,
    parse_seconds,
)
from perfcast.errors import InputError, check_output_file, writing
from perfcast.serve._config import (
    DEFAULT_EXPERT_SKEW,
    DEFAULT_MAX_MODEL_LEN,
    SERVE_KERNEL_MODELS,
    ServeConfig,
)
from perfcast.serve._pools import PoolLayout
from perfcast.specs import (
    ModelSpec,
    Precision,
    cuda_total_bytes,
    get_cluster,
    get_device,
    get_model,
    get_stack,
    parse_dtype,
)

if TYPE_CHECKING:  # the simulator and pandas load when a request runs, not for its --help
    import pandas as pd

    from perfcast.serve import Workload

__all__ = ["Colocation", "Disaggregation", "PoolLayout", "QUANT_SCHEMES", "ResolvedServe",
           "ServeDeployment", "ServeEngine", "ServeModel", "ServeOutputs", "ServeQuantisation",
           "ServeRequest", "ServeResult", "ServeSlos", "ServeWorkload", "SpeculativeDecoding"]

DEFAULT_GPU = "a100-sxm4-80gb"  # when neither --gpu nor --cluster is given
OUT_FORMATS = (".csv", ".parquet")
# Quantisation schemes as AIConfigurator's gemm_quant_mode / moe_quant_mode name them ->
# (activation dtype, weight dtype or None: the same). Block-scaled FP8 (DeepSeek's 128 x 128
# scales) is priced as FP8 GEMMs, as the result says.
QUANT_SCHEMES = {"bf16": ("bf16", None), "fp16": ("fp16", None), "fp8": ("fp8", None),
                 "fp8_block": ("fp8", None), "nvfp4": ("fp4", None), "mxfp4": ("fp4", None),
                 "int8_wo": ("bf16", "int8"), "int4_wo": ("bf16", "int4")}
# Options each disaggregated pool gives for itself (`PoolLayout`), refused beside the pools.
POOL_OPTIONS = ("tp", "pp", "replicas", "ep", "attention_dp", "moe_tp")


class ServeModel(Group):
    """The served model: a catalog name or HF id (decoder-only)."""

    name: str = Field("llama-2-7b", alias="model", description="Catalog model name or HF id.")

    @model_validator(mode="before")
    @classmethod
    def _name_only(cls, value: Any) -> Any:
        return _shorthand(value, "model")


class ServeDeployment(Group):
    """`replicas` copies of a TP x PP group behind the router; MoE layers split over EP x
    MoE-TP ranks of the tp x attention_dp GPUs."""

    tp: int = Field(1, ge=1, le=MAX_GPUS, description="Tensor-parallel degree per replica.")
    pp: int = Field(1, ge=1, le=MAX_GPUS, description="Pipeline stages per replica.")
    replicas: int = Field(1, ge=1, le=MAX_GPUS, description="Replicas behind the router "
                          "(with attention_dp, one worker's ranks unless given).")
    ep: int = Field(1, ge=1, le=MAX_GPUS, description="Expert-parallel degree of MoE layers.")
    attention_dp: int = Field(1, ge=1, le=MAX_GPUS, description="Attention data-parallel ranks "
                              "sharing one EP group (each a replica).")
    moe_tp: int | None = Field(None, ge=1, le=MAX_GPUS, description="Tensor-parallel degree of "
                               "each expert (default: tp x attention-dp / ep).")
    expert_skew: float = Field(DEFAULT_EXPERT_SKEW, ge=1.0, le=64.0, description="Most loaded "
                               "EP rank's routed tokens / the mean (1 = balanced).")


class ServeEngine(Group):
    """The engine's scheduler, router, batching limits, KV cache and collectives."""

    scheduler: str | None = Field(None, description="vllm-v0, vllm-v1, sarathi, prefill-first, "
                                  "orca or static; default: the stack's engine (`perfcast "
                                  "stacks NAME`), else vllm-v0.")
    router: str = Field("round-robin", description="round-robin, least-outstanding or least-kv.")
    max_batch: int | None = Field(None, ge=1, le=MAX_BATCH, description="Max sequences per "
                                  "step; default: the stack engine's for this GPU, else 256.")
    max_batch_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS, description="Token budget "
                                         "per step; default: the stack engine's for this GPU.")
    max_model_len: int | None = Field(None, ge=2, le=MAX_TOKENS, description="Longest request "
                                      "(prompt + output); default: the model's context.")
    chunk_size: int | None = Field(None, ge=1, le=MAX_TOKENS, description="Prefill chunk "
                                   "(sarathi/vllm-v1/prefill-first).")
    block_size: int = Field(16, ge=1, le=1024, description="KV-cache tokens per block.")
    preemption: str = Field("recompute", description="recompute or swap.")
    gpu_memory_utilization: float = Field(0.9, gt=0.0, le=1.0, description="The engine's "
                                          "memory fraction, a share of what kv_budget says.")
    kv_budget: str | None = Field(None, description="What gpu_memory_utilization is a share "
                                  "of: total (the CUDA total: vLLM, SGLang) or free (what "
                                  "the model leaves free: TensorRT-LLM); default: the "
                                  "stack's.")
    allreduce: str = Field("custom", description="TP all-reduce: custom or nccl.")
    host_overlap: bool = Field(False, description="CPU scheduling overlaps the GPU step.")
    prefill_dispatch_us: float | None = Field(
        None, ge=0.0, le=1000.0, allow_inf_nan=False, description="Host microseconds per "
        "kernel of a step with prefill tokens, which the engine launches one by one while "
        "CUDA graphs replay its decode-only steps; default: the stack's (perfcast stacks "
        "NAME; 0 for an engine capturing prefill in graphs).")
    prefix_cache: bool = Field(False, description="Automatic prefix caching.")
    kernel_model: str = Field("calibrated", description="calibrated (the physical model "
                              "fitted per family) or learned (gradient-boosted trees inside "
                              "their envelope over it, issue 18).")

    @field_validator("kernel_model")
    @classmethod
    def _serving_kernel_model(cls, value: str) -> str:
        """Serving prices with a measured-kernel model; the roofline is `infer`'s only."""
        if value not in SERVE_KERNEL_MODELS:
            problem = ("the roofline is not modelled for serving (its step grids, draft "
                       "models and pools are priced from measured kernels); `perfcast infer "
                       "--kernel-model roofline` has it" if value == "roofline"
                       else f"unknown model {value!r}")
            raise InputError("kernel_model", problem, SERVE_KERNEL_MODELS)
        return value


class ServeWorkload(Group):
    """The request stream: arrivals, lengths, shared prompts and chats, and its seed."""

    arrival: str | None = Field(None, description="poisson, gamma, trace or closed_loop "
                                "(default from qps/concurrency).")
    qps: float | None = Field(None, gt=0.0, allow_inf_nan=False, description="Mean arrival "
                              "rate (open loop).")
    concurrency: int | None = Field(None, ge=1, le=MAX_REQUESTS, description="Requests kept in "
                                    "flight (closed loop).")
    cv: float | None = Field(None, gt=0.0, allow_inf_nan=False, description="Gamma arrivals' "
                             "coefficient of variation.")
    num_requests: int = Field(200, ge=1, le=MAX_REQUESTS, description="Requests to simulate.")
    lengths: str = Field("fixed", description="fixed, uniform, zipf, trace or csv.")
    prompt_tokens: str | None = Field(None, description="N (fixed), LO,HI (uniform) or A,MAX "
                                      "(zipf).")
    output_tokens: str | None = Field(None, description="Output tokens, as prompt_tokens.")
    trace: str | None = Field(None, description="Shipped trace: arxiv, splitwise-conv or "
                              "splitwise-code.")
    csv: Path | None = Field(None, description="Request CSV (prompt_tokens, output_tokens"
                             "[, arrival_s]).")
    system_prompt_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS, description="Shared "
                                            "system prompt length.")
    prompt_groups: int = Field(1, ge=1, le=MAX_REQUESTS, description="Distinct system prompts.")
    turns: int | None = Field(None, ge=1, le=MAX_REQUESTS, description="Chats of this many "
                              "turns.")
    think_s: float = Field(0.0, ge=0.0, allow_inf_nan=False, description="Seconds before a "
                           "user's next turn.")
    seed: int = Field(0, ge=0, description="Workload seed.")

    @property
    def arrival_process(self) -> str:
        """The arrival process: given, else closed loop with a concurrency, else Poisson."""
        if self.arrival is not None:
            return self.arrival
        return "closed_loop" if self.concurrency is not None else "poisson"

    def make(self, seed: int, limit: ContextLimit) -> Workload:
        """The stream drawn with `seed`, requests clipped to `limit` (counted in
        `Workload.clipped`); fixed lengths default to 512 prompt, 128 output."""
        from perfcast.serve import make_workload

        prompt, output = self.token_lengths(limit)
        workload = make_workload(
            self.num_requests, arrival=self.arrival_process, qps=self.qps, cv=self.cv,
            concurrency=self.concurrency, lengths=self.lengths, prompt_tokens=prompt,
            output_tokens=output, trace=self.trace, csv=self.csv,
            max_tokens=limit.tokens, system_prompt_tokens=self.system_prompt_tokens,
            prompt_groups=self.prompt_groups, turns=self.turns, think_s=self.think_s,
            seed=seed)
        longest = int((workload.prompt_tokens + workload.output_tokens).max())
        if longest > limit.tokens:  # a chat's history or a system prompt on top of a turn
            raise InputError("max_model_len", f"a request reaches {longest} tokens (its chat "
                             "history or system prompt included), above max_model_len "
                             f"{limit.tokens}", f"--max-model-len >= {longest}, or fewer "
                             "--turns / shorter lengths")
        return workload

    def token_lengths(self, limit: ContextLimit | None = None) -> tuple[Any, Any]:
        """(prompt, output) length specs for `make_workload`, every option checked first
        (fixed lengths against `limit`, when given)."""
        _check_arrivals(self)
        _check_lengths(self)
        defaults = {"fixed": (512, 128)}.get(self.lengths, (None, None))
        prompt = _pair(self.prompt_tokens, "prompt_tokens") or defaults[0]
        output = _pair(self.output_tokens, "output_tokens") or defaults[1]
        if limit is not None:
            _check_fixed_total(self.lengths, prompt, output, limit)
        return prompt, output


@dataclass(frozen=True)
class ContextLimit:
    """The longest request a deployment takes: `tokens`, from --max-model-len (`given`) or
    the model's max_position_embeddings, else DEFAULT_MAX_MODEL_LEN (vLLM's fallback);
    `notes` say where a default or an override came from."""

    tokens: int
    given: bool
    notes: tuple[str, ...] = ()

    @classmethod
    def of(cls, model: ModelSpec, given: int | None) -> ContextLimit:
        trained = model.max_position_embeddings
        if given is not None:
            notes = () if trained is None or given <= trained else (
                f"max_model_len {given} is above {model.name}'s max_position_embeddings "
                f"({trained}): used as given, the KV cache sized for it (vLLM asks for "
                "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)",)
            return cls(given, True, notes)
        if trained is None:
            return cls(DEFAULT_MAX_MODEL_LEN, False, (
                f"{model.name}'s config names no max_position_embeddings: max_model_len "
                f"defaults to {DEFAULT_MAX_MODEL_LEN} (vLLM's fallback)",))
        return cls(trained, False)


def _dash(option: str) -> str:
    return "--" + option.replace("_", "-")


def _check_arrivals(w: ServeWorkload) -> None:
    """One arrival process: open loop (qps) or closed loop (concurrency); cv is gamma's."""
    if w.qps is not None and w.concurrency is not None:
        raise InputError("qps", "--qps and --concurrency: give one (open loop or closed loop)",
                         "--qps (open loop) or --concurrency (closed loop)")
    if w.cv is not None and w.arrival_process != "gamma":
        raise InputError("cv", f"--cv and --arrival {w.arrival_process}: cv shapes gamma "
                         "arrivals only", "--arrival gamma, or omit --cv")


def _check_lengths(w: ServeWorkload) -> None:
    """Lengths come from one place; a source or a shared-content option must be read."""
    if w.lengths in ("trace", "csv"):
        for option in ("prompt_tokens", "output_tokens"):
            if getattr(w, option) is not None:
                raise InputError(option, f"{_dash(option)} and --lengths {w.lengths}: the "
                                 f"{w.lengths} gives every request's lengths",
                                 f"omit {_dash(option)}, or --lengths fixed, uniform or zipf")
    replay = w.arrival_process == "trace"
    unread = (("trace", w.trace is not None and w.lengths != "trace" and not (
        replay and w.csv is None)), ("csv", w.csv is not None and w.lengths != "csv"
                                     and not replay))
    for option, ignored in unread:
        if ignored:
            raise InputError(option, f"{_dash(option)} is read only with --lengths {option} "
                             "or --arrival trace", f"--lengths {option}, --arrival trace, or "
                             f"omit {_dash(option)}")
    for option, needs, given in (("prompt_groups", "system_prompt_tokens", w.prompt_groups != 1),
                                 ("think_s", "turns", w.think_s != 0.0)):
        if given and getattr(w, needs) is None:
            raise InputError(option, f"{_dash(option)} applies only with {_dash(needs)}",
                             f"{_dash(needs)}, or omit {_dash(option)}")


def _check_fixed_total(lengths: str, prompt, output, limit: ContextLimit) -> None:
    """Fixed lengths above the deployment's max model length are refused (drawn ones are
    clipped and counted), naming --max-model-len when the user set it, else the lengths."""
    if lengths == "fixed" and isinstance(prompt, int) and isinstance(output, int) \
            and prompt + output > limit.tokens:
        total, source = prompt + output, ("--max-model-len" if limit.given else
                                           "the model's context (max_position_embeddings)"
                                           if not limit.notes else
                                           "vLLM's fallback: the config names no context")
        raise InputError("max_model_len" if limit.given else "prompt_tokens",
                         f"prompt + output tokens = {total} exceeds max_model_len "
                         f"{limit.tokens} ({source})",
                         f"--prompt-tokens + --output-tokens <= {limit.tokens}, or "
                         f"--max-model-len >= {total}")


def _pair(text: str | None, field: str) -> int | tuple[float | int, ...] | None:
    """'512' -> 512; '128,2048' -> (128, 2048) for uniform/zipf lengths."""
    if text is None:
        return None
    try:
        parts = [float(p) for p in text.split(",")]
    except ValueError:
        raise InputError(field, f"not a number or pair: {text!r}", "N or LO,HI") from None
    if any(abs(p) > MAX_TOKENS for p in parts):
        raise InputError(field, f"{text!r} is over the {MAX_TOKENS:,}-token bound",
                         f"N or LO,HI with values <= {MAX_TOKENS:,}")
    if len(parts) == 1 and parts[0].is_integer():
        return int(parts[0])
    if len(parts) == 2:  # integers stay integers (uniform bounds, zipf's max)
        return tuple(int(p) if p.is_integer() else p for p in parts)
    raise InputError(field, f"not a number or pair: {text!r}", "N or LO,HI")


class SpeculativeDecoding(Group):
    """Draft tokens proposed per step (0: off), by a draft model or draft-free."""

    spec_k: int = Field(0, ge=0, le=16, description="Draft tokens proposed per step (0: off).")
    spec_draft_model: str | None = Field(None, description="Draft model (catalog name); "
                                         "None: draft-free.")
    spec_acceptance: str = Field("0.7", description="Per-token acceptance rate, or one per "
                                 "draft position (A1,A2,...).")
    spec_draft_gpu: str = Field("shared", description="shared or separate.")

    def rates(self) -> float | tuple[float, ...]:
        """The acceptance rate, or one per draft position."""
        try:
            values = tuple(float(v) for v in self.spec_acceptance.split(","))
        except ValueError:
            raise InputError("spec_acceptance", "not a rate or comma-separated rates: "
                             f"{self.spec_acceptance!r}", "e.g. 0.7 or 0.9,0.8,0.6") from None
        return values[0] if len(values) == 1 else values


class Disaggregation(Group):
    """Prefill and decode on separate pools (same model, GPU and scheduler), each a
    `PoolLayout`: `2x(tp8,ep8,dp8,batch256)`, `2x4` (2 workers of TP 4) or its fields."""

    disagg_prefill: PoolLayout | None = Field(None, description="The prefill pool: "
                                              "WORKERSx(tp,pp,ep,dp,moe_tp,batch,tokens) or "
                                              "WORKERSxTP.")
    disagg_decode: PoolLayout | None = Field(None, description="The decode pool, as "
                                             "disagg_prefill.")

    @field_validator("disagg_prefill", "disagg_decode", mode="before")
    @classmethod
    def _layout(cls, value: Any, info) -> PoolLayout | None:
        return None if value is None else PoolLayout.parse(value, info.field_name)

    @property
    def enabled(self) -> bool:
        return self.disagg_prefill is not None or self.disagg_decode is not None

    def pools(self, config: ServeConfig) -> tuple[ServeConfig, ServeConfig]:
        """(prefill, decode) deployments: `config` deployed as each pool's layout."""
        for field in ("disagg_prefill", "disagg_decode"):
            if getattr(self, field) is None:
                raise InputError(field, "disaggregated serving needs both pools",
                                 "e.g. --disagg-prefill 2x4 --disagg-decode 1x(tp8,ep8,dp8)")
        return self.disagg_prefill.config(config), self.disagg_decode.config(config)


class ServeQuantisation(Group):
    """Quantisation schemes as engines and AIConfigurator name them, for the dense GEMMs and
    the experts; they set the precision (--dtype/--weight-dtype, when also given, agree)."""

    gemm_quant: str | None = Field(None, description="Dense GEMMs: fp8, fp8_block, nvfp4, "
                                   "mxfp4, int4_wo, int8_wo, bf16.")
    moe_quant: str | None = Field(None, description="Expert GEMMs, as gemm_quant.")

    @field_validator("gemm_quant", "moe_quant")
    @classmethod
    def _scheme(cls, value: str | None, info) -> str | None:
        if value is not None and value not in QUANT_SCHEMES:
            raise InputError(info.field_name, f"unknown scheme {value!r}", QUANT_SCHEMES)
        return value


class Colocation(Group):
    """More models on the same GPUs, each with its own stream (seeds seed+1, ...)."""

    colocate: list[str] | None = Field(None, description="Models served beside the first.")
    colocate_sharing: str = Field("time-slice", description="time-slice or mps.")

    @field_validator("colocate")
    @classmethod
    def _none_when_empty(cls, value: list[str] | None) -> list[str] | None:
        """No models (a command line without --colocate gives []) is no co-location."""
        return value or None


class ServeSlos(Group):
    """Latency SLOs for goodput: both or neither."""

    ttft_slo: float | None = Field(None, description="TTFT SLO for goodput: 500ms, 0.5s (a "
                                   "bare number is seconds).")
    tpot_slo: float | None = Field(None, description="TPOT SLO for goodput: 50ms, 0.05s (a "
                                   "bare number is seconds).")

    @field_validator("ttft_slo", "tpot_slo", mode="before")
    @classmethod
    def _seconds(cls, value: Any, info) -> float | None:
        """`500ms`, `0.5s` or a bare number of seconds (refused when only ms make sense)."""
        limit = TTFT_PLAIN_MAX_S if info.field_name == "ttft_slo" else TPOT_PLAIN_MAX_S
        return parse_seconds(value, info.field_name, limit)

    def pair(self) -> tuple[float | None, float | None]:
        if (self.ttft_slo is None) != (self.tpot_slo is None):
            raise InputError("ttft_slo", "give both --ttft-slo and --tpot-slo for goodput",
                             "both or neither")
        return self.ttft_slo, self.tpot_slo


class ServeOutputs(Group):
    """Files the run writes: the per-request table and a Perfetto trace (new files only)."""

    out: Path | None = Field(None, description="Per-request table (.csv or .parquet).")
    trace_out: Path | None = Field(None, description="Perfetto/Chrome-trace JSON file.")

    def check(self) -> None:
        check_output_file(self.out, "out")
        check_output_file(self.trace_out, "trace_out")
        if self.out is not None and self.out.suffix not in OUT_FORMATS:
            raise InputError("out", f"unknown format {self.out.suffix!r}", list(OUT_FORMATS))


class ServeRequest(Request):
    """TTFT, TPOT, E2E (mean/P50/P90/P99), throughput, goodput, preemptions and KV use."""

    command = "serve"
    model: ServeModel = ServeModel()
    hardware: Hardware = Hardware()
    deployment: ServeDeployment = ServeDeployment()
    engine: ServeEngine = ServeEngine()
    precision: ServingPrecision = ServingPrecision()
    workload: ServeWorkload = ServeWorkload()
    speculative: SpeculativeDecoding = SpeculativeDecoding()
    disaggregation: Disaggregation = Disaggregation()
    quantisation: ServeQuantisation = ServeQuantisation()
    colocation: Colocation = Colocation()
    slos: ServeSlos = ServeSlos()
    outputs: ServeOutputs = ServeOutputs()
    stack: EngineStackChoice = EngineStackChoice()

    def command_line(self) -> str:
        """The `perfcast serve ...` command that asks this request: every option not at its
        default as its flag (`--` + the option name, dashed), shell-quoted."""
        defaults, args = self.option_defaults(), ["perfcast", "serve"]
        for option, value in self.options().items():
            if option in defaults and value == defaults[option]:
                continue
            flag = _dash(option)
            if isinstance(value, bool):
                args.append(flag if value else "--no-" + flag[2:])
            else:
                for one in value if isinstance(value, list | tuple) else (value,):
                    args += [flag, str(one)]
        return shlex.join(args)


@dataclass(frozen=True)
class ResolvedServe:
    """What `serve` runs. `mode`: single (one deployment), colocated (`configs` and
    `workloads` one per model) or disaggregated (`configs` = prefill and decode pools)."""

    request: ServeRequest
    mode: str
    config: ServeConfig
    configs: tuple[ServeConfig, ...]
    workloads: tuple[Workload, ...]
    gpu: str | None
    slos: tuple[float | None, float | None]
    limit: ContextLimit
    quant: dict[str, Any]


def _check_modes(request: ServeRequest) -> None:
    """Options of a mode the request is not in are refused, not ignored: co-location with
    disaggregation or the output files, pools sized by --tp/--replicas, speculation's
    settings without --spec-k."""
    colocated, disagg = bool(request.colocation.colocate), request.disaggregation.enabled
    if colocated and disagg:
        raise InputError("colocate", "--colocate and --disagg-prefill/--disagg-decode: give "
                         "one (co-located models or disaggregated pools)", "one of them")
    option = request.first_given("out", "trace_out") if colocated else None
    if option is not None:
        raise InputError(option, "is not written for co-located runs (--colocate); the "
                         "payload holds each model's summary", f"omit {_dash(option)}")
    if not colocated and request.first_given("colocate_sharing"):
        raise InputError("colocate_sharing", "applies only with --colocate",
                         "--colocate MODEL, or omit --colocate-sharing")
    option = request.first_given(*POOL_OPTIONS) if disagg else None
    if option is not None:
        raise InputError(option, f"{_dash(option)} and --disagg-prefill/--disagg-decode: each "
                         "pool gives its own layout", f"omit {_dash(option)}, or set it in "
                         "the pools: WORKERSx(tp,pp,ep,dp,moe_tp,batch,tokens)")
    option = request.first_given("spec_acceptance", "spec_draft_gpu")
    if option is not None and request.speculative.spec_k == 0:
        raise InputError(option, "applies only with speculative decoding (--spec-k >= 1)",
                         f"--spec-k N, or omit {_dash(option)}")


def _precision(request: ServeRequest) -> tuple[Precision, dict[str, Any]]:
    """The precision the quantisation schemes set (else --dtype/--weight-dtype's), and what
    the payload says about it. Experts and dense GEMMs in different dtypes are refused:
    `specs.Precision` holds one weight format for every GEMM."""
    q, p = request.quantisation, request.precision
    schemes = {f: s for f, s in (("gemm_quant", q.gemm_quant), ("moe_quant", q.moe_quant)) if s}
    if not schemes:
        return p.spec(), {}
    pairs = {QUANT_SCHEMES[s] for s in schemes.values()}
    if len(pairs) > 1:
        raise InputError("moe_quant", f"{q.moe_quant} experts beside {q.gemm_quant} dense "
                         "GEMMs: one weight format prices every GEMM (specs.Precision)",
                         "a --moe-quant of the --gemm-quant's dtypes")
    dtype, weights = pairs.pop()
    for option, want in (("dtype", dtype), ("weight_dtype", weights or dtype)):
        given = request.first_given(option) and getattr(p, option)
        if given and parse_dtype(given, option) != parse_dtype(want):
            raise InputError(option, f"{given} disagrees with --{next(iter(schemes))} "
                             f"{next(iter(schemes.values()))} ({option} {want})",
                             f"{want}, or omit {_dash(option)}")
    precision = precision_spec(dtype, p.kv_dtype, weights, p.activation_quant)
    info = dict(schemes) | {"priced_as": f"weights {precision.weights.value}, activations "
                            f"{precision.activations.value}"}
    if "fp8_block" in schemes.values():
        info["note"] = "block-scaled FP8 priced as FP8 GEMMs (its scale reads are not modelled)"
    return precision, info


def resolve_serve(request: ServeRequest) -> ResolvedServe:
    """Specs of the deployment(s) and the workload(s); every check before any simulation."""
    _check_modes(request)
    request.outputs.check()
    slos = request.slos.pair()
    hw, d, e, s = request.hardware, request.deployment, request.engine, request.speculative
    gpu = hw.gpu if hw.gpu or hw.cluster else DEFAULT_GPU
    stack = request.stack.spec("serve")
    host = engine_host(stack, None, None, request.stack.host_speed)
    model = get_model(request.model.name)
    limit = ContextLimit.of(model, e.max_model_len)
    precision, quant = _precision(request)
    if quant:  # a checkpoint's scheme on a GPU without its tensor cores: as engines run it
        device = get_cluster(hw.cluster).device if hw.cluster else get_device(gpu)
        precision, note = precision.weight_only_on(device.dtypes)
        if note:
            quant = quant | {"priced_as": f"weights {precision.weights.value}, activations "
                             f"{precision.activations.value}", "weight_only": note}
    q = request.quantisation
    if q.moe_quant and not q.gemm_quant and model.moe is None:
        raise InputError("moe_quant", f"{model.name} has no experts, so --moe-quant would "
                         "price its dense GEMMs", "--gemm-quant (or --moe-quant with an equal "
                         "--gemm-quant)")
    config = ServeConfig(
        stack=stack.name, execution=str(host.execution), host=host.profile,
        host_speed=host.host_speed,
        model=request.model.name, gpu=gpu, cluster=hw.cluster, tp=d.tp, pp=d.pp,
        replicas=d.replicas if request.first_given("replicas") else d.attention_dp,
        scheduler=e.scheduler, router=e.router, max_batch=e.max_batch,
        max_batch_tokens=e.max_batch_tokens, chunk_size=e.chunk_size, block_size=e.block_size,
        preemption=e.preemption, gpu_memory_utilization=e.gpu_memory_utilization,
        kv_budget=e.kv_budget, host_overlap=e.host_overlap, allreduce=e.allreduce,
        prefill_dispatch_s=(None if e.prefill_dispatch_us is None
                            else e.prefill_dispatch_us / 1e6),
        prefix_caching=e.prefix_cache, kernel_model=e.kernel_model,
        spec_k=s.spec_k, spec_draft_model=s.spec_draft_model, spec_draft_gpu=s.spec_draft_gpu,
        spec_acceptance=s.rates(), ep=d.ep, attention_dp=d.attention_dp, moe_tp=d.moe_tp,
        expert_skew=d.expert_skew, precision=precision, max_context=limit.tokens)
    w, seed = request.workload, request.workload.seed
    workload = w.make(seed, limit)
    others = request.colocation.colocate
    parts = (gpu, slos, limit, quant)
    if others:
        configs, loads = [config], [workload]
        for i, m in enumerate(others, start=1):  # each model's own context unless given
            own = limit if limit.given else ContextLimit.of(get_model(m), None)
            configs.append(ServeConfig(**(config.model_dump() | {"model": m,
                                                                 "max_context": own.tokens})))
            loads.append(w.make(seed + i, own))
        return ResolvedServe(request, "colocated", config, tuple(configs), tuple(loads), *parts)
    if request.disaggregation.enabled:
        if request.outputs.trace_out is not None:
            raise InputError("trace_out", "is not available for disaggregated runs yet",
                             "omit it")
        pools = request.disaggregation.pools(config)
        return ResolvedServe(request, "disaggregated", config, pools, (workload,), *parts)
    return ResolvedServe(request, "single", config, (config,), (workload,), *parts)


@dataclass(frozen=True, eq=False)
class ServeResult:
    """A serving run. `requests`: one row per request (for co-located runs, every model's,
    with a `model` column first); `simulation`: the serve layer's result (a
    `perfcast.serve.ServeResult`, a `DisaggResult`, or one ServeResult per co-located model);
    `inputs` and `metrics` make up the payload."""

    request: ServeRequest
    mode: str
    inputs: dict[str, Any]
    metrics: dict[str, Any]
    requests: pd.DataFrame
    simulation: Any

    def payload(self) -> dict[str, Any]:
        return {"perfcast_version": __version__, "inputs": self.inputs, **self.metrics}


def _kv_capacity(result, config: ServeConfig) -> dict:
    """KV capacity in tokens per replica, and how many sequences of this workload's mean
    length (prompt + output) fit in it at once (vLLM logs the same "maximum concurrency");
    a model with recurrent layers holds at most max_batch states (their reserved slots)."""
    r = result.requests
    mean_tokens = float((r["prompt_tokens"] + r["output_tokens"]).mean())
    blocks_per_seq = max(1, math.ceil(mean_tokens / config.block_size))
    seqs = result.kv_blocks // blocks_per_seq
    if config.model_spec.linear_mixer is not None:
        seqs = min(seqs, config.max_batch)
    attention = config.model_spec.num_attention_layers > 0  # else tokens hold no KV
    return {"kv_capacity_tokens": result.kv_blocks * config.block_size if attention else None,
            "max_concurrent_seqs": seqs, "memory": _memory_plan(result.memory, config)}


def _memory_plan(plan, config: ServeConfig) -> dict:
    """Each GPU's memory as the engine's rule placed it: what gpu_memory_utilization is a
    share of (kv_budget: total = vLLM and SGLang, free = TensorRT-LLM), the CUDA-visible
    total it starts from and where that number comes from, and the bytes per part."""
    total, source = cuda_total_bytes(config.cluster_spec.device)
    return {"kv_budget": plan.kv_budget.value, "gpu_memory_utilization":
            config.gpu_memory_utilization, "cuda_total_bytes": total,
            "cuda_total_source": source, "held_bytes": plan.usable_bytes,
            "weights_bytes": plan.weights_bytes, "activation_bytes": plan.activation_bytes,
            "runtime_bytes": plan.runtime_bytes, "state_bytes": plan.state_bytes,
            "kv_bytes": plan.kv_bytes}


def _write_table(table: pd.DataFrame, out: Path | None) -> None:
    if out is not None:
        with writing(out, "out"):
            (table.to_csv if out.suffix == ".csv" else table.to_parquet)(out, index=False)


def _single(r: ResolvedServe) -> ServeResult:
    from perfcast.serve import simulate

    request, config = r.request, r.config
    trace_out = request.outputs.trace_out
    result = simulate(config, r.workloads[0], seed=request.workload.seed,
                      timeline=trace_out is not None)
    metrics = result.summary(*r.slos) | _kv_capacity(result, config)
    _write_table(result.requests, request.outputs.out)
    if trace_out is not None:
        with writing(trace_out, "trace_out"):
            trace_out.write_text(json.dumps(result.chrome_trace()))
    d, e, w = request.deployment, request.engine, request.workload
    inputs = {"model": config.model if isinstance(config.model, str) else config.model.name,
              "gpu": r.gpu, "cluster": request.hardware.cluster, "tp": d.tp, "pp": d.pp,
              "replicas": config.replicas, "scheduler": config.scheduler,
              "max_batch": config.max_batch, "max_batch_tokens": config.token_budget,
              "router": e.router,
              "arrival": w.arrival_process, "qps": w.qps, "concurrency": w.concurrency,
              "num_requests": w.num_requests, "lengths": w.lengths, "seed": w.seed,
              "prefix_cache": e.prefix_cache, "system_prompt_tokens": w.system_prompt_tokens,
              "turns": w.turns, "ep": d.ep, "attention_dp": d.attention_dp,
              "moe_tp": config.plan.moe_tp, "expert_skew": d.expert_skew}
    return ServeResult(request, r.mode, inputs, metrics, result.requests, result)


def _colocated(r: ResolvedServe) -> ServeResult:
    """The first model and the others on the same GPUs, each beside its dedicated run."""
    import pandas as pd

    from perfcast.serve import simulate, simulate_colocated

    seed, sharing = r.request.workload.seed, r.request.colocation.colocate_sharing
    results = simulate_colocated(list(r.configs), list(r.workloads), sharing=sharing, seed=seed)
    models, tables = [], []
    for c, w, res in zip(r.configs, r.workloads, results, strict=True):
        alone = simulate(c, w, seed=seed).summary(*r.slos)
        models.append({"model": c.model_spec.name, **res.summary(*r.slos),
                       "dedicated": {k: alone[k] for k in ("ttft_s", "tpot_s", "e2e_s",
                                                           "throughput_req_s", "kv_blocks")}})
        tables.append(res.requests.assign(model=c.model_spec.name))
    table = pd.concat(tables, ignore_index=True)
    table = table[["model", *(c for c in table.columns if c != "model")]]
    inputs = {"sharing": sharing, "models": [m["model"] for m in models],
              "kv_budget": "total (co-located models split the CUDA total)"}
    return ServeResult(r.request, r.mode, inputs, {"models": models}, table, results)


def _disaggregated(r: ResolvedServe) -> ServeResult:
    """Prefill and decode pools built from the deployment (model, GPU, scheduler, ...)."""
    from perfcast.serve import simulate_disaggregated

    request = r.request
    result = simulate_disaggregated(*r.configs, r.workloads[0], seed=request.workload.seed)
    _write_table(result.requests, request.outputs.out)
    d = request.disaggregation
    inputs = {"disagg_prefill": str(d.disagg_prefill), "disagg_decode": str(d.disagg_decode),
              "prefill_gpus": d.disagg_prefill.gpus, "decode_gpus": d.disagg_decode.gpus,
              "seed": request.workload.seed}
    return ServeResult(request, r.mode, inputs, result.summary(*r.slos), result.requests,
                       result)


_MODES = {"single": _single, "colocated": _colocated, "disaggregated": _disaggregated}


def execute_serve(r: ResolvedServe) -> ServeResult:
    """Simulate, write the files asked for, and summarise."""
    result = _MODES[r.mode](r)
    return dataclasses.replace(result, inputs={**result.inputs, **context_inputs(r),
                                               **stack_inputs(r)})


def context_inputs(r: ResolvedServe) -> dict[str, Any]:
    """The max model length the run took, how many requests were clipped to it (drawn or
    recorded lengths; fixed ones are refused), where a default came from, and the
    quantisation schemes with the precision they were priced as."""
    clipped = sum(w.clipped for w in r.workloads)
    notes = list(r.limit.notes)
    notes += [f"model: {note}" for note in r.config.model_spec.inferred]
    if clipped:
        notes.append(f"{clipped} requests longer than max_model_len {r.limit.tokens} were "
                     "clipped to it (both sides in proportion)")
    out = {"max_model_len": r.limit.tokens, "clipped_requests": clipped}
    if notes:
        out["notes"] = notes
    if r.quant:
        out["quantisation"] = r.quant
    return out


def stack_inputs(r: ResolvedServe) -> dict[str, Any]:
    """The stack the deployment runs, its launch mode, host profile and speed (with the host
    seconds per kernel of its Python-dispatched prefill steps), the kernel model that
    priced it, and where each kernel family's times come from on the deployment's GPU (with
    `learned`, which families the GPU's spec sheet puts inside the trees' envelope)."""
    from perfcast.kernels import family_provenance
    from perfcast.kernels._learned import learned_time_model

    stack, config = get_stack(r.config.stack), r.config
    device = config.cluster_spec.device
    kernels = {"name": config.kernel_model, "stack": stack.name,
               "families": family_provenance(stack, device)}
    if config.kernel_model == "learned":
        kernels["learned_envelope"] = learned_time_model().learned.device_coverage(device)
    out = {"stack": stack.card(), "execution": config.execution, "host": config.host,
           "host_speed": config.host_speed,
           "prefill_dispatch_s": config.prefill_dispatch / config.host_speed,
           "kernel_model": kernels}
    if config.engine_defaults:
        out["engine_defaults"] = config.engine_defaults
    return out


register(ServeRequest, resolve_serve, execute_serve)
