"""Speculative decoding: a drafter proposes k tokens per sequence, the target verifies them
in one forward pass over k + 1 positions, and the accepted prefix plus one token (the
target's own next token) is kept.

Acceptance is per position: the i-th draft token is accepted with probability a_i given
the ones before it were, so m tokens are accepted with probability prod(a_1..a_m) (1 -
a_{m+1}) and a step yields m + 1 tokens; with one rate a for every position the mean is
(1 - a^(k+1)) / (1 - a) (Leviathan et al. 2023, eq. 1). A step's yield is drawn from that
distribution once for the whole batch (every sequence of the step keeps the same number of
tokens), from a stream fixed per replica and step index, so cutting a run of steps short
never changes later draws. Means over many steps are exact; per-request spread is
understated.

Costs, for the step model to price: verification is a prefill of k + 1 tokens per decoding
sequence on its cached context (so it costs little while decode is memory-bound and grows
toward compute saturation: speculation helps at low batch and hurts near saturation); a
draft model adds k decode steps of its own per step and its own prefill of every prompt;
draft-free speculation (n-gram / prompt lookup, self-speculation heads) proposes for free.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from perfcast.errors import InputError
from perfcast.ops import kv_bytes_per_token, weight_bytes_per_gpu
from perfcast.serve._config import ServeConfig
from perfcast.serve._kv import MemoryPlan
from perfcast.serve._step_model import StatsStepTimeModel
from perfcast.specs import KVBudget, get_model

__all__ = ["SpecDecoding", "SpecDraws", "expected_tokens", "spec_memory",
           "yield_probabilities"]

_CHUNK = 4096  # draws generated at a time per replica


def yield_probabilities(rates: tuple[float, ...]) -> np.ndarray:
    """P(step yields 1, 2, ..., k + 1 tokens) for per-position acceptance `rates`."""
    rates = np.asarray(rates, dtype=float)
    accepted_all = np.concatenate(([1.0], np.cumprod(rates)))  # P(first m accepted)
    reject_next = np.append(1.0 - rates, 1.0)
    return accepted_all * reject_next


def expected_tokens(rates: tuple[float, ...]) -> float:
    """Mean tokens per verification step: 1 + sum over m of P(first m drafts accepted)."""
    return float(1.0 + np.cumprod(np.asarray(rates, dtype=float)).sum())


class SpecDraws:
    """Tokens yielded by each step of one replica, by step index (deterministic)."""

    def __init__(self, rates: tuple[float, ...], seed: int, replica: int):
        self.cum = np.cumsum(yield_probabilities(rates))
        self.rng = np.random.default_rng([seed, replica, 0x5EC])
        self.values = np.zeros(0, dtype=np.int64)

    def take(self, start: int, count: int) -> np.ndarray:
        """Yields of steps start .. start + count - 1."""
        while len(self.values) < start + count:
            u = self.rng.random(_CHUNK)
            more = np.searchsorted(self.cum, u, side="right") + 1
            self.values = np.concatenate([self.values, np.minimum(more, len(self.cum))])
        return self.values[start:start + count]


def spec_memory(config: ServeConfig, memory: MemoryPlan) -> MemoryPlan:
    """The target's KV blocks once a draft model shares its GPUs: the draft's weights come
    out of the KV share (under a `free` KV budget, TensorRT-LLM's, only the fraction of them
    the share would have taken) and every cached token also holds the draft's KV."""
    if not config.spec_k or config.spec_draft_model is None or \
            config.spec_draft_gpu == "separate":
        return memory
    draft = get_model(config.spec_draft_model)
    weights = weight_bytes_per_gpu(draft, config.precision, config.plan)
    per_block = memory.bytes_per_block + kv_bytes_per_token(
        draft, config.precision, config.plan) * config.block_size
    taken = weights  # out of the KV share; a free budget's share is of what is left
    if memory.kv_budget is KVBudget.FREE:
        taken = weights * config.gpu_memory_utilization
    kv = memory.kv_bytes - taken
    blocks = int(kv // per_block) if kv > 0 else 0
    if blocks < 1:
        raise InputError("spec_draft_model", f"{draft.name} does not fit beside "
                         f"{config.model_spec.name}: no KV block is left",
                         "a smaller draft, spec_draft_gpu='separate', or more memory")
    return replace(memory, weights_bytes=memory.weights_bytes + weights, kv_bytes=kv,
                   usable_bytes=memory.usable_bytes + weights - taken,
                   bytes_per_block=per_block, blocks=blocks)


class SpecDecoding:
    """What the stepper needs: k, each replica's yield draws, and the step pricing."""

    def __init__(self, config: ServeConfig, draft_model: StatsStepTimeModel | None, seed: int):
        self.k = config.spec_k
        self.rates = config.spec_rates
        self.draws = [SpecDraws(self.rates, seed, i) for i in range(config.replicas)]
        self.draft = draft_model  # None when draft-free

    def price(self, cost, pt: float, ps: float, pk: float, pairs: float, n: int,
              cached_keys: float) -> float:
        """Seconds of one step: prefill chunks (pt tokens of ps sequences, pk keys, pairs)
        beside the verification of n sequences holding `cached_keys` cached tokens, each
        checking k + 1 positions, plus the draft model's prefill and its k decode steps."""
        q = self.k + 1
        d = cost.stats_s(pt + n * q, ps + n, pk + cached_keys + n * q,
                         pairs + q * cached_keys + n * q * (q + 1) / 2, 0.0, 0.0)
        draft = self.draft
        if draft is not None:
            if pt:
                d += draft.stats_time_s(pt, ps, pk, pairs, 0.0, 0.0)
            for j in range(self.k if n else 0):
                d += draft.stats_time_s(0.0, 0.0, 0.0, 0.0, float(n), cached_keys + n * (j + 1))
        return d
