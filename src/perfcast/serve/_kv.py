"""Paged KV cache of one replica: how many blocks fit (the GPU memory planner) and a block
pool with a watermark and a host swap area. Blocks are counted, not named: which physical
block a sequence holds does not change any time, so a count per replica is all the
simulator needs (a sequence holding c tokens owns ceil(c / block_size) blocks, less the
prefix-cache blocks it shares: see perfcast.serve._prefix)."""

from __future__ import annotations

from dataclasses import dataclass

from perfcast.errors import InputError
from perfcast.ops import inference_memory, kv_bytes_per_token, state_bytes_per_sequence
from perfcast.serve._config import ServeConfig
from perfcast.specs import KVBudget, cuda_total_bytes

__all__ = ["KVCache", "MemoryPlan", "plan_memory"]


@dataclass(frozen=True)
class MemoryPlan:
    """Per-GPU bytes of one replica: usable (what the engine holds) = weights + activation
    workspace + runtime + recurrent states + KV; blocks is the KV share in blocks of
    `block_size` tokens; kv_budget is the rule that sized the KV share (perfcast.specs.
    KVBudget)."""

    usable_bytes: float
    weights_bytes: float
    activation_bytes: float
    runtime_bytes: float
    kv_bytes: float
    bytes_per_block: float
    blocks: int
    state_bytes: float = 0.0  # recurrent layers' per-sequence states, max_batch slots
    kv_budget: KVBudget = KVBudget.TOTAL


def _kv_share(budget: KVBudget, total: float, fraction: float, parts: tuple[float, ...]
              ) -> tuple[float, float]:
    """(bytes the engine's rule leaves for KV, bytes the engine holds) given `parts` =
    (weights, recurrent states, activation workspace, runtime) per GPU (KVBudget)."""
    weights, states, act, runtime = parts
    if budget is KVBudget.FREE:  # TensorRT-LLM: a share of what the model leaves free
        kv = fraction * (total - weights - states - act - runtime)
        return kv, weights + states + act + runtime + kv
    share = fraction * total  # vLLM: everything in the share
    return share - weights - act - runtime - states, share


def _budget_text(budget: KVBudget, total: float, fraction: float, weights: float,
                 workspace: float) -> str:
    gb = 1e-9
    if budget is KVBudget.FREE:
        free = total - weights - workspace
        if free <= 0:
            return (f"free_gpu_memory_fraction {fraction:g} of nothing: no memory of "
                    f"{total * gb:.1f} GB CUDA-visible is left free")
        return (f"free_gpu_memory_fraction {fraction:g} of the {free * gb:.1f} GB the model "
                f"leaves free of {total * gb:.1f} GB CUDA-visible")
    return f"{fraction * total * gb:.1f} GB usable ({fraction:g} of {total * gb:.1f} GB " \
           "CUDA-visible)"


def plan_memory(config: ServeConfig) -> MemoryPlan:
    """The KV blocks left on each GPU of a replica once weights, the activation workspace of
    the largest step (token budget prefill, max_batch logits) and runtime buffers are placed,
    by the engine's rule for `gpu_memory_utilization` (`config.budget_rule`: a share of the
    memory CUDA reports, perfcast.specs.cuda_total_bytes, for vLLM and SGLang; of what the
    model leaves free for TensorRT-LLM), never of the marketed decimal capacity."""
    model, device = config.model_spec, config.cluster_spec.device
    prec, plan = config.precision, config.plan
    fp = inference_memory(model, prec, plan, 1, 0, min(config.token_budget,
                                                       config.context_limit))
    logits = (config.max_batch - 1) * model.vocab_size / plan.tp * 4.0
    act = fp.activation_bytes + logits
    total, fraction, budget = cuda_total_bytes(device)[0], config.gpu_memory_utilization, \
        config.budget_rule
    # recurrent layers' states: one slot per schedulable sequence, reserved up front
    states = state_bytes_per_sequence(model, prec, plan) * config.max_batch
    placed, workspace = fp.weights_bytes + states, act + fp.runtime_bytes
    kv, usable = _kv_share(budget, total, fraction, (fp.weights_bytes, states, act,
                                                     fp.runtime_bytes))
    per_block = kv_bytes_per_token(model, prec, plan) * config.block_size
    if per_block == 0:  # attention-free (pure SSM): tokens hold no memory, states do
        per_block = 1.0
    blocks = int(min(kv // per_block, 2**31 - 1)) if kv > 0 else 0
    if blocks < 1:
        gb = 1e-9
        raise InputError("gpu_memory_utilization", f"{model.name} does not fit: "
                         f"{_budget_text(budget, total, fraction, placed, workspace)}, "
                         f"weights {fp.weights_bytes * gb:.1f} GB + activations "
                         f"{act * gb:.1f} GB + "
                         + (f"recurrent states {states * gb:.1f} GB + " if states else "")
                         + "runtime "
                         f"{fp.runtime_bytes * gb:.1f} GB leave no KV block",
                         ("a smaller --max-model-len or --max-batch-tokens (the largest "
                          "prefill's workspace), a chunked-prefill scheduler, "
                          if act > fraction * total - fp.weights_bytes else "")
                         + "a higher utilisation, more tp/pp, or a larger gpu")
    return MemoryPlan(usable, fp.weights_bytes, act, fp.runtime_bytes, kv, per_block, blocks,
                      states, budget)


class KVCache:
    """Block pool of one replica (counts per GPU; every GPU of a replica holds the same
    number of blocks). `used` blocks are allocated; `host_used` are swapped out."""

    __slots__ = ("block_size", "capacity", "used", "watermark", "host_capacity", "host_used",
                 "bytes_per_block", "pcie_bps", "peak_used", "cached_idle", "evict")

    def __init__(self, config: ServeConfig, memory: MemoryPlan):
        self.block_size = config.block_size
        self.capacity = memory.blocks
        self.used = 0
        self.peak_used = 0
        self.watermark = int(config.watermark * memory.blocks)
        self.bytes_per_block = memory.bytes_per_block
        self.host_capacity = int(config.swap_space_gb * 1e9 // memory.bytes_per_block)
        self.host_used = 0
        self.pcie_bps = config.cluster_spec.device.pcie_bandwidth_bps or 16e9
        self.cached_idle = 0  # prefix-cache blocks nobody uses: free, but holding content
        self.evict = None  # the prefix cache's eviction, when there is one

    @property
    def free(self) -> int:
        return self.capacity - self.used

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def can_admit(self, blocks: int) -> bool:
        """Room for a new sequence's blocks while keeping the watermark free."""
        return self.capacity - self.used - blocks >= self.watermark

    def allocate(self, blocks: int) -> None:
        self.used += blocks
        assert self.used <= self.capacity, "KV blocks in use exceed capacity"
        over = self.used + self.cached_idle - self.capacity
        if over > 0:  # reclaim idle cached blocks, least recently used first
            self.evict(over)
        if self.used > self.peak_used:
            self.peak_used = self.used

    def release(self, blocks: int) -> None:
        self.used -= blocks
        assert self.used >= 0

    def swap_out(self, blocks: int) -> float | None:
        """Move blocks to host memory; seconds of PCIe transfer, or None when host is full."""
        if self.host_used + blocks > self.host_capacity:
            return None
        self.release(blocks)
        self.host_used += blocks
        return blocks * self.bytes_per_block / self.pcie_bps

    def swap_in(self, blocks: int) -> float:
        """Bring swapped blocks back (caller checked can_admit); seconds of PCIe transfer."""
        self.allocate(blocks)
        self.host_used -= blocks
        return blocks * self.bytes_per_block / self.pcie_bps
