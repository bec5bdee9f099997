"""Mutable simulation state, created per simulation and owned by the engine: the requests
(struct of lists, indexed by request id) and each replica's queues, decode set and KV pool.

The decode set is kept in aggregate so a decode step costs O(1) whatever the batch size:
a member's context is `anchor + D` where D counts the replica's decode steps, the batch's
total context is `sum(anchors) + n D`, and the blocks a step adds are the members whose
context sits on a block boundary, counted per residue of the anchor modulo the block size.
"""

from __future__ import annotations

import heapq
from array import array
from collections import deque

import numpy as np

from perfcast.errors import InputError
from perfcast.serve._kv import KVCache

__all__ = ["Replica", "Requests"]


class Requests:
    """Per-request state and results, one typed column per field, indexed by request id.

    Columns are `array.array`s: scalar reads and writes cost what a list's do, but a request
    takes ~90 bytes (no Python object per value), and the metrics view them as numpy arrays
    without a copy (`column`)."""

    def __init__(self, arrival_s, prompt_tokens, output_tokens, prefix_group=None,
                 prefix_tokens=None, preloaded_tokens=None):
        n = len(prompt_tokens)
        self.arrival_s = _floats(arrival_s)
        self.prompt = _ints(prompt_tokens, "prompt_tokens")
        self.output = _ints(output_tokens, "output_tokens")
        self.replica = _filled("i", -1, n)
        self.computed = _filled("i", 0, n)  # tokens whose KV is cached (off the decode set)
        self.generated = _filled("i", 0, n)
        nan = float("nan")
        self.first_token_s = _filled("d", nan, n)
        self.completion_s = _filled("d", nan, n)
        self.scheduled_s = _filled("d", nan, n)
        self.last_token_s = _filled("d", nan, n)
        self.preemptions = _filled("i", 0, n)
        self.restarts = _filled("i", 0, n)
        self.completions = 0
        # prefix caching: content group and shared leading tokens, cached blocks referenced
        self.group = _filled("i", -1, n) if prefix_group is None else \
            _ints(prefix_group, "prefix_group")
        self.shared = _filled("i", 0, n) if prefix_tokens is None else \
            _ints(prefix_tokens, "prefix_tokens")
        self.cached_blocks = _filled("i", 0, n)
        self.prefix_hit = _filled("i", 0, n)  # prompt tokens found cached, over admissions
        # KV that arrives with the request (disaggregated decode pool), until first admitted
        self.preloaded = _filled("i", 0, n) if preloaded_tokens is None else \
            _ints(preloaded_tokens, "preloaded_tokens")

    def __len__(self) -> int:
        return len(self.prompt)

    @staticmethod
    def column(values: array) -> np.ndarray:
        """A column as a numpy array sharing its memory (read it before the state changes)."""
        return np.frombuffer(values, dtype=_DTYPES[values.typecode])


_DTYPES = {"d": np.float64, "i": np.int32}


def _filled(typecode: str, value: float, n: int) -> array:
    return array(typecode, [value]) * n


def _floats(values) -> array:
    return array("d", np.asarray(values, dtype=np.float64).tobytes())


def _ints(values, name: str) -> array:
    """Token counts and ids as int32 (refused, not wrapped, beyond its range)."""
    a = np.asarray(values)
    if len(a) and (a.min() < -2**31 or a.max() >= 2**31):
        raise InputError(name, f"{a.max()} does not fit a 32-bit count", "< 2^31")
    return array("i", a.astype(np.int32).tobytes())


class Replica:
    """One TP x PP group: waiting/running/swapped queues, the decode set, the KV pool and
    the step being run. `running` keeps admission order (the tail is preempted first)."""

    def __init__(self, index: int, kv: KVCache, reserve: bool):
        self.index, self.kv, self.reserve = index, kv, reserve
        self.waiting: deque[int] = deque()
        self.running: dict[int, None] = {}
        self.prefilling: dict[int, None] = {}  # running, still prefilling (ordered)
        self.swapped: deque[int] = deque()
        self.reserved: dict[int, int] = {}  # blocks reserved for a request's whole length
        self.prefill_kv_tokens = 0  # tokens cached by prefilling requests
        # decode set
        self.D = 0
        self.members: dict[int, tuple[int, int]] = {}  # rid -> (anchor, D at its last token)
        self.anchor_sum = 0
        self.residues = [0] * kv.block_size
        self.ends: list[tuple[int, int]] = []  # heap of (D at last token, rid)
        self.pending_gaps: list[float] = []  # last-token times of members not yet decoded
        self.unreported: list[int] = []  # first tokens the next step's overlap will report
        self.unreported_done: list[tuple[int, float]] = []  # completions likewise
        self.last_decode_end_s = float("nan")
        # the step in flight
        self.busy = False
        self.generation = 0
        self.wake_pending = False
        self.step = None
        self.prefix = None  # PrefixCache when prefix caching is on
        self.step_tokens = 1  # tokens each decoding member gains in the next step
        self.spec_steps = 0  # speculative decode steps run (index into the yield draws)

    # -- decode set ---------------------------------------------------------------------
    @property
    def n_decode(self) -> int:
        return len(self.members)

    def decode_keys(self, ahead: int = 0) -> int:
        """Total context (new token included) of the decode batch `ahead` steps from now."""
        return self.anchor_sum + len(self.members) * (self.D + ahead + 1)

    def join_decode(self, rid: int, computed: int, remaining: int, last_token_s: float) -> None:
        anchor = computed - self.D
        self.members[rid] = (anchor, self.D + remaining)
        self.anchor_sum += anchor
        self.residues[anchor % self.kv.block_size] += 1
        heapq.heappush(self.ends, (self.D + remaining, rid))
        self.pending_gaps.append(last_token_s)

    def leave_decode(self, rid: int) -> int:
        """Remove a member; its cached tokens."""
        anchor, _ = self.members.pop(rid)
        self.anchor_sum -= anchor
        self.residues[anchor % self.kv.block_size] -= 1
        return anchor + self.D

    def growth(self, ahead: int = 0) -> int:
        """Blocks the decode step `ahead` steps from now adds (0 when KV is reserved)."""
        if self.reserve:
            return 0
        return self.residues[-(self.D + ahead) % self.kv.block_size]

    def step_growth(self) -> int:
        """Blocks the next step adds to the decode set (`step_tokens` tokens per member)."""
        if self.step_tokens == 1:
            return self.growth()
        return sum(self.growth(j) for j in range(self.step_tokens))

    def steps_to_next_end(self) -> int:
        """Decode tokens (one-token steps) until the first member emits its last token."""
        ends, members = self.ends, self.members
        while ends and members.get(ends[0][1], (0, -1))[1] != ends[0][0]:
            heapq.heappop(ends)  # stale: the member left
        return ends[0][0] - self.D if ends else 0

    def pop_finished(self) -> list[tuple[int, int]]:
        """Remove the members whose last token the steps so far emitted; (id, cached tokens)."""
        out, ends, members, D = [], self.ends, self.members, self.D
        while ends and ends[0][0] <= D:
            end, rid = heapq.heappop(ends)
            if members.get(rid, (0, -1))[1] == end:
                out.append((rid, self.leave_decode(rid)))
        return out

    # -- KV accounting --------------------------------------------------------------------
    def blocks_held(self, rid: int, computed: int) -> int:
        return self.reserved.get(rid) or self.kv.blocks_for(computed)

    def kv_tokens(self) -> int:
        """Tokens cached on this replica (prefilling and decoding requests)."""
        return self.prefill_kv_tokens + self.anchor_sum + len(self.members) * self.D

    def outstanding(self) -> int:
        return len(self.waiting) + len(self.running) + len(self.swapped)
