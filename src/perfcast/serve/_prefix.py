"""Automatic prefix caching of one replica (vLLM's hash-indexed block cache, SGLang's radix
tree): full KV blocks of shared content are keyed by (content group, block index), so a
block's key names its tokens and every block before it, as a hash chain does.

A cached block is referenced by the running sequences that use it (reference counts);
when none does it stays cached, idle, until its space is needed, and idle blocks are
evicted least recently used first. Idle blocks count as free for admission (they can be
evicted at once) but hold their content until then, so a later request of the group, or a
preempted request restarting, finds them. A new request reuses the longest run of cached
blocks from the start of its sequence, leaving at least its last prompt token to compute
(the engine needs one token's logits), and its own full blocks of shared content join the
cache as they are computed.
"""

from __future__ import annotations

from collections import OrderedDict

from perfcast.serve._kv import KVCache

__all__ = ["PrefixCache"]


class PrefixCache:
    """Keys of cached blocks with their reference counts, and the idle ones in LRU order."""

    __slots__ = ("kv", "refs", "idle", "hit_tokens", "lookup_tokens")

    def __init__(self, kv: KVCache):
        self.kv = kv
        self.refs: dict[tuple[int, int], int] = {}
        self.idle: OrderedDict[tuple[int, int], None] = OrderedDict()
        self.hit_tokens = 0  # prompt tokens admissions found cached
        self.lookup_tokens = 0  # prompt tokens admissions looked up
        kv.evict = self._evict

    def lookup(self, group: int, shared_tokens: int, tokens: int) -> tuple[int, int]:
        """(cached leading blocks, how many of them are idle) for a sequence of `tokens`
        tokens whose first `shared_tokens` are content of `group`."""
        if group < 0:
            return 0, 0
        bs = self.kv.block_size
        limit = min(shared_tokens, tokens - 1) // bs
        hits = idle = 0
        refs, cold = self.refs, self.idle
        while hits < limit:
            key = (group, hits)
            if key in refs:
                pass
            elif key in cold:
                idle += 1
            else:
                break
            hits += 1
        return hits, idle

    def acquire(self, group: int, blocks: int, prompt_tokens: int) -> None:
        """Reference the first `blocks` cached blocks of `group` (a new sequence uses them)."""
        refs, cold, kv = self.refs, self.idle, self.kv
        for i in range(blocks):
            key = (group, i)
            if key in cold:
                del cold[key]
                kv.cached_idle -= 1
                kv.allocate(1)
                refs[key] = 1
            else:
                refs[key] += 1
        self.hit_tokens += blocks * kv.block_size
        self.lookup_tokens += prompt_tokens

    def insert(self, group: int, start: int, stop: int) -> int:
        """A sequence's own computed blocks start..stop-1 of `group` join the cache (held by
        it); stops at a block another sequence cached meanwhile. Blocks inserted."""
        refs, cold = self.refs, self.idle
        for i in range(start, stop):
            key = (group, i)
            if key in refs or key in cold:
                return i - start
            refs[key] = 1
        return max(stop - start, 0)

    def release(self, group: int, blocks: int) -> None:
        """A sequence stops using its first `blocks` cached blocks of `group`."""
        refs, cold, kv = self.refs, self.idle, self.kv
        for i in reversed(range(blocks)):  # deepest first: evicted before their parents
            key = (group, i)
            left = refs[key] - 1
            if left:
                refs[key] = left
                continue
            del refs[key]
            cold[key] = None
            kv.release(1)
            kv.cached_idle += 1

    def _evict(self, blocks: int) -> None:
        """Drop the `blocks` least recently released idle blocks (their space is needed)."""
        cold, kv = self.idle, self.kv
        for _ in range(blocks):
            cold.popitem(last=False)
        kv.cached_idle -= blocks
