"""The software stack a workload runs on: framework, kernels, fusions, graph capture, host.

A forecast is of a stack running on a device: the same GPU runs the same model at very
different speeds under HF transformers eager, torch.compile, vLLM, SGLang, TensorRT-LLM or
Megatron, because their attention kernels, fusions, graph capture and host overheads differ.
A `Stack` names each of those; `perfcast.kernels` routes every kernel family to the measured
tables of the stack's kernel source (`kernel_sources`), and the composer takes launch mode and
host costs from `host` and `graph_capture`.
"""

from __future__ import annotations

import json
from enum import StrEnum
from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from perfcast.errors import InputError, close_matches, from_validation_error
from perfcast.specs._device import Device
from perfcast.specs._memory import cuda_total_bytes

__all__ = ["AttentionBackend", "BatchTier", "EngineDefaults", "GraphCapture", "HostModel",
           "KVBudget", "Stack", "get_stack", "stack_names"]


class AttentionBackend(StrEnum):
    """The attention kernel a stack runs: `eager` materialises the s x s score matrix (HF's
    legacy attention: bmm, scale, mask, softmax, bmm); the others are fused kernels."""

    EAGER = "eager"
    SDPA = "sdpa"  # torch.nn.functional.scaled_dot_product_attention (flash / mem-efficient)
    FA2 = "fa2"
    FA3 = "fa3"
    FA4 = "fa4"
    FLASHINFER = "flashinfer"
    TRTLLM_FMHA = "trtllm-fmha"
    TRITON = "triton"

    @property
    def fused(self) -> bool:
        return self is not AttentionBackend.EAGER


class GraphCapture(StrEnum):
    """How kernels reach the GPU: one Python dispatch each, replayed CUDA graphs, or
    torch.compile (Inductor: fused pointwise kernels, optionally in CUDA graphs)."""

    NONE = "none"
    CUDA_GRAPHS = "cuda-graphs"
    TORCH_COMPILE = "torch-compile"


class KVBudget(StrEnum):
    """What a serving engine's memory fraction (perfcast's `gpu_memory_utilization`) is a
    share of; the KV cache gets what is left of it.

    `total`: vLLM's gpu_memory_utilization, a share of the CUDA total holding weights,
    activation workspace, runtime buffers and KV (vLLM `requested_memory = total_gpu_memory
    * gpu_memory_utilization`). SGLang's mem_fraction_static is priced the same way: it
    holds weights and the KV pool only, its workspace living in the rest, and SGLang picks
    its default per GPU to leave that workspace free, so the KV share comes out about the
    same. `free`: TensorRT-LLM's free_gpu_memory_fraction, a share of the memory left free
    once weights, workspace and runtime are placed (its KvCacheConfig: "allocate 90% of free
    GPU memory for KV cache")."""

    TOTAL = "total"
    FREE = "free"


class HostModel(BaseModel):
    """CPU time the stack spends to issue work, on its reference CPU.

    `op_dispatch_s`: per eager kernel (Python, ATen dispatch, cudaLaunchKernel; measured per
    decoder layer / kernels, so module calls are inside it); `module_s`: a further per-kernel
    Python cost where a stack's module overhead is measured apart (charged per kernel, as HF
    modules run one GEMM or a few pointwise kernels each); `step_s`: per model forward
    outside the kernels perfcast lists (scheduler, sampler, input preparation; in HF models
    the causal mask and the rotary tables); `generate_s`: per new token of HF generate()
    beyond the forward (logits processors, stopping criteria, cache and mask updates, the
    sync on the finished flag). `prefill_dispatch_s`: per kernel (perfcast's serving op
    table) of a serving-engine step that carries prefill tokens: the engines replay CUDA
    graphs for decode-only steps and dispatch prefill and mixed steps kernel by kernel
    (SGLang's extend batches run eager PyTorch), so a short prefill waits on its host
    (`perfcast.compose.ServingStepModel`); fitted on end-to-end TTFT
    (scripts/fit_prefill_dispatch.py: TensorRT-LLM's and vLLM's show none).
    `train_dispatch_s`: per eager kernel of a training
    iteration (forward, autograd's backward and the optimizer together; None: not measured,
    the inference dispatch stands in) and `train_step_s` per iteration beyond those kernels.
    A GPU host's CPU runs them `host_speed` times faster than
    the reference CPU (`perfcast.specs.Device` has no host CPU: the factor is an input,
    default 1). `spread` (low, high): how far another host's time may differ from the
    reference, as a factor (the measured hosts' range); it widens 90% intervals only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    op_dispatch_s: float = Field(ge=0.0, le=1e-3)
    module_s: float = Field(0.0, ge=0.0, le=1e-3)
    step_s: float = Field(0.0, ge=0.0, le=1.0)
    generate_s: float = Field(0.0, ge=0.0, le=1.0)
    prefill_dispatch_s: float = Field(0.0, ge=0.0, le=1e-3)
    train_dispatch_s: float | None = Field(None, ge=0.0, le=1e-3)
    train_step_s: float = Field(0.0, ge=0.0, le=1.0)
    spread: tuple[float, float] = (1.0, 1.0)
    serving_profile: str | None = None  # a fitted serving-engine host profile (compose)
    reference_cpu: str
    provenance: str = Field(min_length=1)

    @field_validator("spread")
    @classmethod
    def _spread_brackets_one(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0 < v[0] <= 1 <= v[1]:
            raise ValueError(f"spread must be (low, high) with 0 < low <= 1 <= high, got {v}")
        return v


class BatchTier(BaseModel):
    """One row of an engine's batching defaults: GPUs with at least `min_memory_gib` of
    CUDA-visible memory (and no `exclude` substring in their name) get `max_batch_tokens`
    tokens per step and at most `max_seqs` running sequences."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_memory_gib: float = Field(ge=0.0)
    max_batch_tokens: int = Field(ge=1)
    max_seqs: int = Field(ge=1)
    exclude: tuple[str, ...] = ()


class EngineDefaults(BaseModel):
    """What a serving engine's scheduler does when its user sets nothing: the scheduler
    perfcast models it with and its batching limits per GPU memory tier (the engines choose
    them from the GPU they start on), each with the source line it follows."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scheduler: Literal["vllm-v0", "vllm-v1", "sarathi", "orca", "static", "prefill-first"]
    tiers: tuple[BatchTier, ...] = Field(min_length=1)
    provenance: str = Field(min_length=1)

    @field_validator("tiers")
    @classmethod
    def _tiers_cover_every_gpu(cls, value: tuple[BatchTier, ...]) -> tuple[BatchTier, ...]:
        if not any(t.min_memory_gib == 0 and not t.exclude for t in value):
            raise ValueError("one tier must have min_memory_gib 0 and no exclusions, so every "
                             "GPU gets a default")
        return value

    def tier_for(self, device_name: str, memory_bytes: float) -> BatchTier:
        """The first tier (largest memory first) `device_name` with `memory_bytes` of
        CUDA-visible memory qualifies for."""
        gib, name = memory_bytes / 2**30, device_name.lower()
        for tier in sorted(self.tiers, key=lambda t: -t.min_memory_gib):
            if gib >= tier.min_memory_gib and not any(x in name for x in tier.exclude):
                return tier
        raise AssertionError("unreachable: the validator requires a catch-all tier")

    def tier_on(self, device: Device) -> BatchTier:
        """`device`'s tier, by the memory the engine sees at start-up (the CUDA total)."""
        return self.tier_for(device.name, cuda_total_bytes(device)[0])


class Stack(BaseModel):
    """One software stack (see module docstring). Families absent from `kernel_sources`
    are priced with the `default` source (perfcast's shipped calibration)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]{0,39}$")
    framework: str = Field(min_length=1)
    version: str = Field(min_length=1)
    description: str = Field(min_length=1)
    attention: AttentionBackend
    gemm_library: str = Field(min_length=1)
    fused: frozenset[str] = frozenset()
    graph_capture: GraphCapture = GraphCapture.NONE
    host: HostModel
    kernel_sources: dict[str, str] = Field(default_factory=dict)
    borrowed: dict[str, str] = Field(default_factory=dict)  # family -> whose kernels, why
    # family -> {GPU architecture or "default": the kernel (op name in the source's tables)}
    kernels: dict[str, dict[str, str]] = Field(default_factory=dict)
    training_memory: str = "amp"
    # the op table `perfcast train` prices: a Megatron-style fused one, or the HF module graph
    # as eager PyTorch launches it (perfcast.compose.EagerGraph)
    training_graph: Literal["megatron", "eager"] = "megatron"
    kv_budget: KVBudget = KVBudget.TOTAL  # what a serving engine's memory fraction covers
    engine: EngineDefaults | None = None  # a serving engine's scheduler defaults
    # ZeRO-2/3 (FSDP) sharding inside pipeline stages: torchtitan's FSDP2 + PP does it;
    # Megatron-Core and DeepSpeed shard only the optimizer state across pipelines
    pipeline_sharding: bool = False
    provenance: str = Field(min_length=1)

    @field_validator("fused")
    @classmethod
    def _known_fusions(cls, value: frozenset[str]) -> frozenset[str]:
        unknown = sorted(value - FUSIONS)
        if unknown:
            raise ValueError(f"unknown fusion(s) {unknown} (allowed: {sorted(FUSIONS)})")
        return value

    @field_validator("kernels")
    @classmethod
    def _kernels_have_default(cls, value: dict[str, dict[str, str]]) -> dict:
        missing = sorted(f for f, by_arch in value.items() if "default" not in by_arch)
        if missing:
            raise ValueError(f"kernels of {missing} need a 'default' entry")
        return value

    def kernel_for(self, family: str, arch: str) -> str | None:
        """The kernel the stack runs for `family` on a GPU of `arch` (None: the family's
        rows keep their op names)."""
        by_arch = self.kernels.get(family)
        return None if by_arch is None else by_arch.get(arch, by_arch["default"])

    @property
    def serving_engine(self) -> bool:
        """A serving engine (replays CUDA-graph decode, runs its own fused op table), not a
        PyTorch model run by its module graph."""
        return self.graph_capture is GraphCapture.CUDA_GRAPHS

    @property
    def eager(self) -> bool:
        """Kernels dispatched one by one from Python (no graph replay)."""
        return self.graph_capture is GraphCapture.NONE

    def kernel_source(self, family: str) -> str:
        return self.kernel_sources.get(family, "default")

    def card(self) -> dict:
        """What a result prints about the stack it is for."""
        return {"name": self.name, "framework": self.framework, "version": self.version,
                "attention": self.attention.value, "graph_capture": self.graph_capture.value,
                "fused": sorted(self.fused), "training_memory": self.training_memory,
                "training_graph": self.training_graph,
                "pipeline_sharding": self.pipeline_sharding}


# Op groups a stack may fuse into neighbouring kernels (see perfcast.ops.FUSION_RULES).
FUSIONS = frozenset({"norm", "activation", "rope", "residual", "pointwise"})


@cache
def _catalog() -> dict:
    text = (resources.files("perfcast.specs") / "data" / "stacks.json").read_text()
    return json.loads(text)


@cache
def _stacks() -> dict[str, Stack]:
    out = {}
    for entry in _catalog()["stacks"]:
        try:
            stack = Stack.model_validate(entry)
        except ValidationError as exc:  # a shipped-data bug: say which entry
            raise from_validation_error(exc, origin=f"stacks.json:{entry.get('name')}") from None
        out[stack.name] = stack
    return out


def stack_names() -> list[str]:
    return list(_stacks())


def get_stack(name: str) -> Stack:
    """A shipped stack by name (`perfcast stacks` lists them)."""
    stacks = _stacks()
    key = name.strip().lower() if isinstance(name, str) else name
    key = _catalog().get("aliases", {}).get(key, key)
    if key in stacks:
        return stacks[key]
    near = close_matches(str(name), stacks)
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    raise InputError("stack", f"unknown stack {name!r}{hint}", list(stacks))
