"""Running one replica's steps: plan (scheduler) -> duration (cost) -> commit (tokens, first
tokens, completions, KV growth, step statistics).

A stable decode-only plan runs as a *run* of k steps in one event: k stops at the first
member's last token, at the last step whose KV growth still fits, or at the first step
ending at or after `horizon_s` (the next arrival), so the run is step-for-step what one
event per step would give. An arrival routed to a replica mid-run truncates it (`cut`).

With `output_lag` (engines whose CPU work for step n overlaps GPU step n+1: TensorRT-LLM's
overlap scheduler, vLLM's async scheduling, SGLang's overlap mode), a step's sampled tokens
reach the client only when the next step ends (first tokens and completions; a closed-loop
client sends its next request then); when the replica goes idle after the step, at once.
"""

from __future__ import annotations

from bisect import bisect_left

import numpy as np

from perfcast.serve._cost import StepCost
from perfcast.serve._metrics import StepLog
from perfcast.serve._plan import Plan, cache_own_blocks, release_blocks
from perfcast.serve._schedulers import Scheduler
from perfcast.serve._spec import SpecDecoding
from perfcast.serve._state import Replica, Requests

__all__ = ["Stepper"]

MAX_RUN_STEPS = 4096
RUN_CHUNK = 16  # steps priced per call in a decode run, growing 4x per call


class Step:
    """The step (or run of decode steps) a replica has in flight."""

    __slots__ = ("plan", "k", "durations", "ends", "growth", "n", "tokens")

    def __init__(self, plan: Plan, durations: np.ndarray, ends: np.ndarray,
                 growth: np.ndarray | None, n: int, tokens: np.ndarray | None = None):
        self.plan, self.durations, self.ends, self.growth, self.n = plan, durations, ends, \
            growth, n
        self.k = len(durations)
        self.tokens = tokens  # speculative decoding: tokens each member gains, per step


class Stepper:
    """Starts and commits steps for every replica of one simulation."""

    def __init__(self, req: Requests, scheduler: Scheduler, cost: StepCost, logs: list[StepLog],
                 output_lag: bool = False, spec: SpecDecoding | None = None):
        self.req, self.scheduler, self.cost, self.logs = req, scheduler, cost, logs
        self.output_lag = output_lag
        self.spec = spec
        self.reported: list[tuple[int, float]] = []  # lagged completions, as the client saw

    # -- start ----------------------------------------------------------------------------
    def start(self, rep: Replica, now_s: float, horizon_s: float) -> float | None:
        """Plan the replica's next step(s); their end time, or None when it has no work."""
        spec = self.spec
        if spec is not None:  # the next step's yield, which its KV growth needs
            rep.step_tokens = int(spec.draws[rep.index].take(rep.spec_steps, 1)[0])
        plan = self.scheduler.schedule(rep, now_s)
        if plan.empty:  # idle: the last step's outputs went out when it ended
            rep.unreported.clear()
            self.reported.extend(rep.unreported_done)
            rep.unreported_done.clear()
            return None
        n = rep.n_decode if plan.decode else 0
        if spec is not None:
            step = self._spec_steps(rep, plan, n, now_s, horizon_s)
        elif plan.stable and n:
            step = self._run(rep, plan, n, now_s, horizon_s)
        elif self.cost.fast:
            d = self.cost.stats_s(*self._prefill_stats(plan), float(n),
                                  float(rep.decode_keys(0) if n else 0))
            d += plan.swap_s
            step = Step(plan, [d], [now_s + d], None, n)  # lists: one step needs no numpy
        else:
            req = self.req
            pt = tuple(t for _, t in plan.prefill)
            pc = tuple(req.computed[r] for r, _ in plan.prefill)
            dc = self._contexts(rep, 0) if n else ()
            d = self.cost.step_s(pt, pc, dc) + plan.swap_s
            step = Step(plan, np.array([d]), np.array([now_s + d]), None, n)
        rep.step = step
        if rep.unreported or rep.unreported_done:
            self._report(rep, float(step.ends[0]))
        return float(step.ends[-1])

    def _prefill_stats(self, plan: Plan) -> tuple[float, float, float, float]:
        """The plan's prefill chunks as `scalar_stats` gives them (same arithmetic): new
        tokens, sequences, keys (cached + new) and causal query-key pairs."""
        req, pt, pk, pairs = self.req, 0, 0, 0
        for rid, q in plan.prefill:
            c = req.computed[rid]
            pt += q
            pk += c
            pairs += q * c + q * (q + 1) / 2
        return float(pt), float(len(plan.prefill)), float(pt + pk), float(pairs)

    def _report(self, rep: Replica, at_s: float) -> None:
        """Outputs of the previous step reach the client when this one ends (output_lag)."""
        req = self.req
        for rid in rep.unreported:
            req.first_token_s[rid] = at_s
        for rid, _ in rep.unreported_done:
            req.completion_s[rid] = at_s
            self.reported.append((rid, at_s))
        rep.unreported.clear()
        rep.unreported_done.clear()

    def drain_reported(self) -> list[tuple[int, float]]:
        """Completions the client has seen since the last call: (request id, time)."""
        out, self.reported = self.reported, []
        return out

    def _contexts(self, rep: Replica, ahead: int) -> tuple[int, ...]:
        base = rep.D + ahead + 1
        return self.cost.decode_contexts(
            rep.n_decode, rep.decode_keys(ahead),
            lambda: tuple(a + base for a, _ in rep.members.values()))

    def _run(self, rep: Replica, plan: Plan, n: int, now_s: float, horizon_s: float) -> Step:
        k = min(rep.steps_to_next_end(), MAX_RUN_STEPS)
        cost = self.cost
        if cost.fast:
            return self._fast_run(rep, plan, n, now_s, horizon_s, k)
        growth = None
        if not rep.reserve and k > 1:
            bs = rep.kv.block_size
            j = np.arange(1, k)
            growth = np.cumsum(np.asarray(rep.residues)[(-(rep.D + j)) % bs])
            k = min(k, 1 + int(np.searchsorted(growth, rep.kv.free, side="right")))
        durations = cost.decode_run_s(lambda j: cost.step_s((), (), self._contexts(rep, j)), k)
        ends = np.cumsum(np.concatenate(([now_s], durations)))[1:]
        if ends[-1] > horizon_s:
            k = min(k, int(np.searchsorted(ends, horizon_s, side="left")) + 1)
            durations, ends = durations[:k], ends[:k]
        return Step(plan, durations, ends, growth, n)

    def _fast_run(self, rep: Replica, plan: Plan, n: int, now_s: float, horizon_s: float,
                  k: int) -> Step:
        """`_run` with every step priced exactly, step by step, up to the first step that
        ends at or after the horizon (the steps after it would be cut anyway)."""
        durations, ends = self.cost.model.decode_run_s(n, rep.decode_keys(0), k, now_s,
                                                       horizon_s)
        k = priced = len(durations)
        growth = None
        if not rep.reserve and k > 1:
            kv = rep.kv
            residues, bs, D, free, total = rep.residues, kv.block_size, rep.D, kv.free, 0
            growth = []
            for j in range(1, k):
                total += residues[-(D + j) % bs]
                if total > free:  # step j + 1 would not fit: the run stops at step j
                    k = j
                    break
                growth.append(total)
        if k < priced:
            durations, ends = durations[:k], ends[:k]
        return Step(plan, durations, ends, growth, n)  # lists: the commit reads them in Python

    def _spec_steps(self, rep: Replica, plan: Plan, n: int, now_s: float,
                    horizon_s: float) -> Step:
        """A speculative step (its prefill chunks priced beside the verification), or a run
        of them while the decode set is stable: each member gains the step's drawn yield;
        the run stops at the step where a member reaches its last token, where KV growth
        would not fit, or at the first step ending at or after the horizon."""
        spec, cost = self.spec, self.cost
        pt, ps, pk, pairs = self._prefill_stats(plan)
        if not n:  # prefill only: the draft model prefills too
            d = spec.price(cost, pt, ps, pk, pairs, 0, 0.0) + plan.swap_s
            return Step(plan, [d], [now_s + d], None, 0)
        limit = min(rep.steps_to_next_end(), MAX_RUN_STEPS) if plan.stable else 1
        draws = spec.draws[rep.index].take(rep.spec_steps, max(limit, 1))
        before = np.concatenate(([0], np.cumsum(draws)))  # tokens gained before each step
        k = int(np.searchsorted(before[1:], limit, side="left")) + 1 if plan.stable else 1
        durations, ends, growth, grown, end = [], [], [], 0, now_s
        keys0 = rep.anchor_sum + n * rep.D  # cached context of the decode set
        for j in range(k):
            if j:
                if end >= horizon_s:
                    break
                g = sum(rep.growth(int(before[j]) + t) for t in range(int(draws[j])))
                if grown + g > rep.kv.free:
                    break
                grown += g
                growth.append(grown)
                pt = ps = pk = pairs = 0.0  # the prefill chunks ran in the first step only
            d = spec.price(cost, pt, ps, pk, pairs, n, keys0 + n * float(before[j]))
            d += plan.swap_s if not j else 0.0
            end += d
            durations.append(d)
            ends.append(end)
        k = len(durations)
        return Step(plan, np.array(durations), np.array(ends), growth or None, n,
                    np.array(draws[:k]))

    @staticmethod
    def cut(rep: Replica, at_s: float) -> float | None:
        """Truncate a run at the first step ending at or after `at_s`; the new end or None."""
        step = rep.step
        if step is None or step.k == 1 or step.ends[-2] < at_s:
            return None
        k = bisect_left(step.ends, at_s) + 1
        step.k, step.durations, step.ends = k, step.durations[:k], step.ends[:k]
        if step.tokens is not None:
            step.tokens = step.tokens[:k]
        return float(step.ends[-1])

    # -- commit ---------------------------------------------------------------------------
    def finish(self, rep: Replica) -> list[tuple[int, float]]:
        """Apply the step in flight; (request id, time) of the requests it completed (with
        output_lag: none; `drain_reported` gives them once the client has seen them)."""
        step, req, kv = rep.step, self.req, rep.kv
        rep.step = None
        k, n, plan = step.k, step.n, step.plan
        if step.growth is not None and k > 1:
            kv.allocate(int(step.growth[k - 2]))
        self._log(rep, step)
        done: list[tuple[int, float]] = []
        if n:
            self._decoded(rep, step)
            end = float(step.ends[-1])
            for rid, computed in rep.pop_finished():
                done.append((rid, end))
                self._release(rep, rid, computed, end)
        end = float(step.ends[-1])
        for rid, t in plan.prefill:
            c = req.computed[rid] + t
            req.computed[rid] = c
            rep.prefill_kv_tokens += t
            if rep.prefix is not None:  # its full blocks of shared content join the cache
                cache_own_blocks(rep, req, rid, c)
            if c < req.prompt[rid] + req.generated[rid]:
                continue
            gen = req.generated[rid] + 1
            req.generated[rid] = gen
            if gen == 1:
                req.first_token_s[rid] = end
                if self.output_lag:
                    rep.unreported.append(rid)
            else:  # a restarted request's next token
                self.logs[rep.index].itl.single.append(end - req.last_token_s[rid])
            req.last_token_s[rid] = end
            del rep.prefilling[rid]
            rep.prefill_kv_tokens -= c
            if gen == req.output[rid]:
                done.append((rid, end))
                self._release(rep, rid, c, end)
            else:
                rep.join_decode(rid, c, req.output[rid] - gen, end)
        if self.output_lag and done:  # the client learns of these when the next step ends
            rep.unreported_done.extend(done)
            return []
        return done

    def _decoded(self, rep: Replica, step: Step) -> None:
        """Advance the decode set by the run's k steps; record inter-token gaps."""
        if step.tokens is not None:
            self._spec_decoded(rep, step)
            return
        log, first_end = self.logs[rep.index], float(step.ends[0])
        pending = rep.pending_gaps
        log.itl.single.extend(first_end - t for t in pending)
        if step.n > len(pending):
            log.itl.add(np.array([first_end - rep.last_decode_end_s]), step.n - len(pending))
        if step.k > 1:
            log.itl.add(step.durations[1:], step.n)
        rep.pending_gaps = []
        rep.last_decode_end_s = float(step.ends[-1])
        rep.D += step.k

    def _spec_decoded(self, rep: Replica, step: Step) -> None:
        """`_decoded` for speculative steps: a step yielding y tokens spreads its gap over
        them (y values of gap / y each), so mean ITL is time per token."""
        log, first_end = self.logs[rep.index], float(step.ends[0])
        y = step.tokens.astype(float)
        pending = rep.pending_gaps
        if pending:
            log.itl.add(np.array([(first_end - t) / y[0] for t in pending]), y[0])
        if step.n > len(pending):
            log.itl.add(np.array([(first_end - rep.last_decode_end_s) / y[0]]),
                        (step.n - len(pending)) * y[0])
        if step.k > 1:
            log.itl.add(np.asarray(step.durations[1:]) / y[1:], step.n * y[1:])
        log.spec_steps += step.k
        log.spec_tokens += float(y.sum())
        rep.pending_gaps = []
        rep.last_decode_end_s = float(step.ends[-1])
        rep.D += int(step.tokens.sum())
        rep.spec_steps += step.k

    def _release(self, rep: Replica, rid: int, computed: int, end_s: float) -> None:
        req = self.req
        req.generated[rid] = req.output[rid]
        req.completion_s[rid] = req.last_token_s[rid] = end_s
        req.computed[rid] = computed
        release_blocks(rep, req, rid, computed)
        del rep.running[rid]
        req.completions += 1

    def _log(self, rep: Replica, step: Step) -> None:
        """Utilisation and fragmentation while the step runs (allocated, before release).
        Fill is capped at 1: sequences sharing prefix-cache blocks hold more tokens than
        the blocks they allocated. Step j of a run holds the blocks allocated before it
        (the run's growth up to step j) and j + 1 more tokens per decoding member (or the
        tokens speculative steps yielded)."""
        kv, k, log = rep.kv, step.k, self.logs[rep.index]
        new = sum(t for _, t in step.plan.prefill)
        tokens0 = rep.kv_tokens() + new
        if log.timeline is not None:
            self._log_timeline(rep, step, log, tokens0, new)
            return
        cap, bs, n, used0 = kv.capacity, kv.block_size, step.n, kv.used
        growth, gained = step.growth, step.tokens
        last = growth[k - 2] if growth is not None and k > 1 else 0
        spec = gained is not None
        total = 0
        busy, util_area, frag_area, frag_s = log.busy_s, log.util_area, log.frag_area, \
            log.frag_s  # summed step by step, as StepLog.add's totals
        for j, d in enumerate(step.durations[:k]):
            d = float(d)
            used = used0 - last + (growth[j - 1] if j and growth is not None else 0)
            if spec:
                total += int(gained[j])
            tokens = tokens0 + n * (total if spec else j + 1)
            busy += d
            util_area += used / cap * d
            if used > 0:
                fill = tokens / max(used * bs, 1)
                frag_area += (1.0 - (fill if fill < 1.0 else 1.0)) * d
                frag_s += d
        log.steps += k
        log.busy_s, log.util_area, log.frag_area, log.frag_s = busy, util_area, frag_area, \
            frag_s

    def _log_timeline(self, rep: Replica, step: Step, log: StepLog, tokens0: int,
                      new: int) -> None:
        """`_log` keeping every step (start, duration, batch, tokens, KV use) as arrays."""
        kv, k = rep.kv, step.k
        durations, ends = np.asarray(step.durations[:k]), np.asarray(step.ends[:k])
        used = np.full(k, float(kv.used))
        if step.growth is not None and k > 1:
            grown = np.concatenate(([0], step.growth[:k - 1]))
            used -= grown[-1] - grown
        gained = np.arange(1, k + 1) if step.tokens is None else np.cumsum(step.tokens)
        tokens = tokens0 + step.n * gained
        log.add(ends - durations, durations, used / kv.capacity,
                np.minimum(tokens / np.maximum(used * kv.block_size, 1.0), 1.0),
                step.n + len(step.plan.prefill), step.n + new)
