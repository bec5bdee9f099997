"""Per-replica batch schedulers with the semantics of the systems they are named after.

Each is a stateless policy: `schedule(state, now_s)` reads and updates the replica's queues
and KV pool (admissions, preemptions, the first step's KV growth) and returns the step's
`Plan`. Prefill chunks are allocated here; decode growth of a step is reserved here.

- vllm-v0: waiting prompts first (whole prompts under the token budget, KV with watermark,
  prefill-only steps); otherwise decode every running sequence, preempting the most recently
  admitted when KV cannot grow (recompute: back to the waiting front; swap: to host), then
  swap back in when there was no preemption.
- vllm-v1 / sarathi: running requests first (decodes, then continuing prefill chunks), then
  new prompts, chunked to fill the token budget (Sarathi: budget = chunk size). KV of a new
  prompt: Sarathi-Serve allocates the whole prompt's blocks at admission (watermark checked
  against all of them; its `VLLMBlockSpaceManager.get_num_initial_blocks` is the prompt's
  logical blocks, as vLLM v0's block manager, whose chunked prefill is Sarathi's), so later
  chunks need no blocks and only decode growth preempts; vLLM v1 (`allocate_slots`) allocates
  each chunk's blocks as it is scheduled.
- prefill-first (SGLang): waiting and partly prefilled prompts first, in prefill-only steps
  chunked to the budget (SGLang's chunked_prefill_size); a decode step of every running
  sequence only when no prefill can run (SGLang's mixed chunks are off by default). KV is
  allocated chunk by chunk, as in vllm-v1.
- orca: iteration-level batching of whole prompts and decodes, KV reserved for a request's
  full length at admission (no preemption), no token budget beyond max_batch.
- static: a batch of up to max_batch requests runs to completion before the next forms.
"""

from __future__ import annotations

from typing import Protocol

from perfcast.serve._config import ServeConfig
from perfcast.serve._plan import (
    Plan,
    admit,
    grow_decodes,
    preempt_tail,
    prefix_hits,
    preloaded,
)
from perfcast.serve._reserving import FirstComeScheduler, Orca, Static
from perfcast.serve._state import Replica, Requests

__all__ = ["FirstComeScheduler", "Plan", "Scheduler", "make_scheduler"]


class Scheduler(Protocol):
    """Decides one step of one replica. `reserves_kv`: KV is held for a request's whole
    length from admission (no growth, no preemption)."""

    reserves_kv: bool

    def schedule(self, state: Replica, now_s: float) -> Plan: ...


class VllmV0:
    """Prefill-first, whole prompts, no mixing of prefills and decodes."""

    reserves_kv = False

    def __init__(self, config: ServeConfig, req: Requests):
        self.req, self.max_seqs, self.budget = req, config.max_batch, config.token_budget
        self.swap = config.preemption == "swap"

    def schedule(self, rep: Replica, now_s: float) -> Plan:
        req, kv, plan = self.req, rep.kv, Plan()
        if not rep.swapped:
            budget = self.budget
            while rep.waiting and len(rep.running) < self.max_seqs:
                rid = rep.waiting[0]
                total = req.prompt[rid] + req.generated[rid]
                hit, idle = prefix_hits(rep, req, rid, total)
                n = total - preloaded(req, rid, hit, kv.block_size)
                blocks = kv.blocks_for(total) - hit
                if n > budget or not kv.can_admit(blocks + idle):
                    break
                admit(rep, req, rid, blocks, now_s, hit)
                plan.prefill.append((rid, n))
                budget -= n
            if plan.prefill:
                return plan
        grow_decodes(rep, req, plan, self.swap)
        while rep.swapped and not plan.preempted and len(rep.running) < self.max_seqs:
            rid = rep.swapped[0]
            computed = req.computed[rid]
            blocks = kv.blocks_for(computed)
            extra = int(computed % kv.block_size == 0)  # its next token opens a block
            if not kv.can_admit(blocks + extra):
                break
            rep.swapped.popleft()
            plan.swap_s += kv.swap_in(blocks)
            kv.allocate(extra)
            rep.running[rid] = None
            rep.join_decode(rid, computed, req.output[rid] - req.generated[rid],
                            req.last_token_s[rid])
            plan.decode = True
        return plan


class Chunked:
    """Running requests first (decodes, continuing chunks), then new prompts, chunked to fill
    the token budget (vLLM v1 with chunk = budget unless set; Sarathi-Serve: budget = chunk)."""

    reserves_kv = False

    def __init__(self, config: ServeConfig, req: Requests):
        self.req, self.max_seqs, self.budget = req, config.max_batch, config.token_budget
        self.chunk = config.prefill_chunk or config.token_budget
        self.decode_tokens = 1 + config.spec_k  # verified positions per decoding sequence
        # a new prompt's blocks: all at admission (Sarathi-Serve), or chunk by chunk (v1)
        self.whole_prompt = config.scheduler == "sarathi"

    def _chunk(self, rep: Replica, rid: int, budget: int) -> tuple[int, int]:
        req = self.req
        done = req.computed[rid]
        n = min(req.prompt[rid] + req.generated[rid] - done, budget, self.chunk)
        if self.whole_prompt:  # its blocks came with its admission
            return n, 0
        return n, rep.kv.blocks_for(done + n) - rep.kv.blocks_for(done)

    def schedule(self, rep: Replica, now_s: float) -> Plan:
        plan = Plan()
        grow_decodes(rep, self.req, plan, swap=False, whole_prompt=self.whole_prompt)
        self._prefill(rep, now_s, plan, self.budget - rep.n_decode * self.decode_tokens)
        return plan

    def _prefill(self, rep: Replica, now_s: float, plan: Plan, budget: int) -> None:
        """Continuing prefill chunks, then new prompts, into `plan` within `budget` tokens."""
        req, kv = self.req, rep.kv
        for rid in list(rep.prefilling):
            if budget <= 0:
                break
            if rid not in rep.prefilling:  # preempted below to make room
                continue
            n, blocks = self._chunk(rep, rid, budget)
            while blocks > kv.free and next(reversed(rep.running)) != rid \
                    and next(reversed(rep.running)) in rep.prefilling:
                preempt_tail(rep, req, swap=False)
                plan.preempted += 1
            if blocks > kv.free:
                break
            kv.allocate(blocks)
            plan.prefill.append((rid, n))
            budget -= n
        while rep.waiting and budget > 0 and len(rep.running) < self.max_seqs:
            rid = rep.waiting[0]
            total = req.prompt[rid] + req.generated[rid]
            hit, idle = prefix_hits(rep, req, rid, total)
            done = preloaded(req, rid, hit, kv.block_size)
            n = min(total - done, budget, self.chunk)
            blocks = kv.blocks_for(total if self.whole_prompt else done + n) - hit
            if not kv.can_admit(blocks + idle):
                break
            admit(rep, req, rid, blocks, now_s, hit)
            plan.prefill.append((rid, n))
            budget -= n


class PrefillFirst(Chunked):
    """SGLang's default loop: a step of prefill chunks (continuing ones, then new prompts,
    the last cut to fill the chunked-prefill budget) whenever one can be formed, with the
    running decodes paused; otherwise a decode step of every running sequence. KV blocks
    are taken chunk by chunk, as the prompt's tokens are written (`whole_prompt` is
    Sarathi's alone)."""

    def schedule(self, rep: Replica, now_s: float) -> Plan:
        plan = Plan()
        self._prefill(rep, now_s, plan, self.budget)
        if not plan.prefill:
            grow_decodes(rep, self.req, plan, swap=False)
        return plan


_KINDS = {"vllm-v0": VllmV0, "vllm-v1": Chunked, "sarathi": Chunked, "orca": Orca,
          "static": Static, "prefill-first": PrefillFirst}


def make_scheduler(config: ServeConfig, req: Requests) -> Scheduler:
    return _KINDS[config.scheduler](config, req)
