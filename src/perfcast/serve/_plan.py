"""A step's plan and the queue/KV moves every scheduler shares: admission, preemption of
the most recently admitted request (recompute or swap) and the decode set's KV growth."""

from __future__ import annotations

from dataclasses import dataclass, field

from perfcast.serve._state import Replica, Requests

__all__ = ["Plan", "admit", "grow_decodes", "preempt_tail"]


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


def preempt_tail(rep: Replica, req: Requests, swap: bool) -> float:
    """Preempt the most recently admitted running request; swap seconds (0 when recomputed)."""
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
    blocks = rep.blocks_held(rid, computed)
    if swap and decoding:
        seconds = rep.kv.swap_out(blocks)
        if seconds is not None:
            req.computed[rid] = computed
            rep.swapped.append(rid)
            return seconds
    rep.kv.release(blocks)
    req.computed[rid] = 0
    req.restarts[rid] += 1
    rep.waiting.appendleft(rid)
    return 0.0


def grow_decodes(rep: Replica, req: Requests, plan: Plan, swap: bool) -> None:
    """Make room for the decode set's next token (preempting from the tail), reserve it."""
    while rep.members and rep.growth() > rep.kv.free:
        plan.swap_s += preempt_tail(rep, req, swap)
        plan.preempted += 1
    rep.kv.allocate(rep.growth())
    plan.decode = bool(rep.members)


def admit(rep: Replica, req: Requests, rid: int, blocks: int, now_s: float) -> None:
    rep.waiting.popleft()
    rep.kv.allocate(blocks)
    rep.running[rid] = None
    rep.prefilling[rid] = None
    if req.scheduled_s[rid] != req.scheduled_s[rid]:  # nan: first time scheduled
        req.scheduled_s[rid] = now_s
