"""A step's plan and the queue/KV moves every scheduler shares: admission, preemption of
the most recently admitted request (recompute or swap) and the decode set's KV growth."""

from __future__ import annotations

from dataclasses import dataclass, field

from perfcast.serve._state import Replica, Requests

__all__ = ["Plan", "admit", "cache_own_blocks", "grow_decodes", "preempt_tail", "prefix_hits",
           "preloaded", "release_blocks"]


@dataclass(slots=True)
class Plan:
    """One step: prefill chunks (request id, new tokens), whether the decode set runs, and
    transfer seconds (swaps). `stable`: decode only and nothing changed this step, so the
    same plan repeats until an arrival, completion or KV boundary."""

    prefill: list[tuple[int, int]] = field(default_factory=list)
    decode: bool = False
    swap_s: float = 0.0
    preempted: int = 0

    @property
    def empty(self) -> bool:
        return not self.prefill and not self.decode

    @property
    def stable(self) -> bool:
        return self.decode and not self.prefill and not self.preempted and not self.swap_s


def preempt_tail(rep: Replica, req: Requests, swap: bool, whole_prompt: bool = False) -> float:
    """Preempt the most recently admitted running request; swap seconds (0 when recomputed).
    `whole_prompt`: a prefilling request holds its whole prompt's blocks (allocated at
    admission), not only its computed tokens'."""
    rid = next(reversed(rep.running))
    del rep.running[rid]
    req.preemptions[rid] += 1
    decoding = rid in rep.members
    if decoding:
        computed = rep.leave_decode(rid)
        req.generated[rid] = computed + 1 - req.prompt[rid]
    else:
        computed = req.computed[rid]
        rep.prefilling.pop(rid)
        rep.prefill_kv_tokens -= computed
    if swap and decoding:
        seconds = rep.kv.swap_out(rep.blocks_held(rid, computed))
        if seconds is not None:
            req.computed[rid] = computed
            rep.swapped.append(rid)
            return seconds
    release_blocks(rep, req, rid, computed)
    if whole_prompt and not decoding:  # the blocks of its prompt not computed yet
        kv = rep.kv
        kv.release(kv.blocks_for(req.prompt[rid] + req.generated[rid])
                   - kv.blocks_for(computed))
    req.computed[rid] = 0
    req.restarts[rid] += 1
    rep.waiting.appendleft(rid)
    return 0.0


def grow_decodes(rep: Replica, req: Requests, plan: Plan, swap: bool,
                 whole_prompt: bool = False) -> None:
    """Make room for the decode set's next token (preempting from the tail), reserve it."""
    while rep.members and rep.step_growth() > rep.kv.free:
        plan.swap_s += preempt_tail(rep, req, swap, whole_prompt)
        plan.preempted += 1
    rep.kv.allocate(rep.step_growth())
    plan.decode = bool(rep.members)


def prefix_hits(rep: Replica, req: Requests, rid: int, tokens: int) -> tuple[int, int]:
    """(cached leading blocks a waiting request of `tokens` tokens would reuse, how many of
    them are idle, i.e. need their space back); (0, 0) without prefix caching."""
    if rep.prefix is None:
        return 0, 0
    return rep.prefix.lookup(req.group[rid], req.shared[rid], tokens)


def preloaded(req: Requests, rid: int, hit_blocks: int, block_size: int) -> int:
    """Tokens a waiting request need not compute: cache hits, or KV that came with it."""
    return max(hit_blocks * block_size, req.preloaded[rid])


def cache_own_blocks(rep: Replica, req: Requests, rid: int, computed: int) -> None:
    """With prefix caching, the sequence's full blocks of shared content among its
    `computed` tokens join the cache (held by it) past the ones it already holds there."""
    cache, held = rep.prefix, req.cached_blocks[rid]
    if cache is None or req.group[rid] < 0:
        return
    full = min(computed, req.shared[rid]) // rep.kv.block_size
    if full > held:
        req.cached_blocks[rid] = held + cache.insert(req.group[rid], held, full)


def release_blocks(rep: Replica, req: Requests, rid: int, computed: int) -> None:
    """Free a leaving sequence's KV: reserved blocks, or its private blocks and its
    references to cached ones, after caching its own full blocks of shared content."""
    reserved = rep.reserved.pop(rid, 0)
    if reserved:
        rep.kv.release(reserved)
        return
    cache_own_blocks(rep, req, rid, computed)
    cached = req.cached_blocks[rid]
    rep.kv.release(rep.kv.blocks_for(computed) - cached)
    if cached:
        rep.prefix.release(req.group[rid], cached)
    req.cached_blocks[rid] = 0


def admit(rep: Replica, req: Requests, rid: int, blocks: int, now_s: float,
          hit_blocks: int = 0) -> None:
    """Move the head of the waiting queue to running with `blocks` new blocks, reusing its
    first `hit_blocks` from the prefix cache (their tokens count as computed)."""
    rep.waiting.popleft()
    if rep.prefix is not None:
        tokens = req.prompt[rid] + req.generated[rid]
        rep.prefix.acquire(req.group[rid], hit_blocks, tokens)
        hit = hit_blocks * rep.kv.block_size
        req.computed[rid] = hit
        req.cached_blocks[rid] = hit_blocks
        req.prefix_hit[rid] += hit
        rep.prefill_kv_tokens += hit
    if req.preloaded[rid]:  # its KV arrived with it (into blocks allocated below)
        req.computed[rid] = req.preloaded[rid]
        rep.prefill_kv_tokens += req.preloaded[rid]
        req.preloaded[rid] = 0  # a restart recomputes (the transferred KV is gone)
    rep.kv.allocate(blocks)
    rep.running[rid] = None
    rep.prefilling[rid] = None
    if req.scheduled_s[rid] != req.scheduled_s[rid]:  # nan: first time scheduled
        req.scheduled_s[rid] = now_s
