"""Schedulers that reserve KV for a request's whole length at admission, so nothing is
ever preempted: Orca (iteration-level), static batching (FasterTransformer) and a
one-at-a-time test double."""

from __future__ import annotations

from perfcast.serve._config import ServeConfig
from perfcast.serve._plan import Plan, admit
from perfcast.serve._state import Replica, Requests

__all__ = ["FirstComeScheduler", "Orca", "Static"]


class Orca:
    """Iteration-level batching: whole prompts join the running decodes each iteration; KV is
    reserved for prompt + output at admission, so nothing is ever preempted."""

    batch_forms_when_empty = False
    reserves_kv = True

    def __init__(self, config: ServeConfig, req: Requests):
        self.req, self.max_seqs = req, config.max_batch
        self.budget = config.max_batch_tokens or 1 << 30

    def schedule(self, rep: Replica, now_s: float) -> Plan:
        req, kv, plan = self.req, rep.kv, Plan(decode=bool(rep.members))
        if self.batch_forms_when_empty and rep.running:
            return plan
        budget = self.budget
        while rep.waiting and len(rep.running) < self.max_seqs:
            rid = rep.waiting[0]
            n = req.prompt[rid]
            blocks = kv.blocks_for(n + req.output[rid])
            if n > budget or not kv.can_admit(blocks):
                break
            admit(rep, req, rid, blocks, now_s)
            rep.reserved[rid] = blocks
            plan.prefill.append((rid, n))
            budget -= n
        return plan


class Static(Orca):
    """FasterTransformer-style static batching: a batch forms only when the last one drained;
    finished requests leave early but nobody joins until the whole batch is done."""

    batch_forms_when_empty = True


class FirstComeScheduler:
    """Test double: one request at a time, whole prompt then its decodes, no KV pressure."""

    reserves_kv = True

    def __init__(self, config: ServeConfig, req: Requests):
        self.req = req

    def schedule(self, rep: Replica, now_s: float) -> Plan:
        if rep.running:
            return Plan(decode=bool(rep.members))
        if not rep.waiting:
            return Plan()
        rid = rep.waiting[0]
        n = self.req.prompt[rid]
        blocks = rep.kv.blocks_for(n + self.req.output[rid])
        admit(rep, self.req, rid, blocks, now_s)
        rep.reserved[rid] = blocks
        return Plan(prefill=[(rid, n)])
