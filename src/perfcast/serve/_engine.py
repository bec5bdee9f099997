"""`simulate`: a serving deployment under a workload, as a discrete-event simulation.

Events: a replica's step (or run of decode steps) ends (priority 0), a request arrives
(1), an idle or finished replica looks for work (2) - so at one instant steps finish first,
then arrivals are queued, then schedulers run and see them all. Open-loop arrivals are fed
one at a time from the workload; a closed loop submits the next request when one completes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfcast.comm import CustomAllReduce, RingAlphaBeta
from perfcast.compose import ServingStepModel
from perfcast.errors import InputError
from perfcast.kernels import ExecutionTimeModel, default_time_model, stack_kernel_model
from perfcast.kernels._learned import learned_time_model
from perfcast.progress import current as current_progress
from perfcast.serve._config import ServeConfig
from perfcast.serve._cost import StepCost
from perfcast.serve._events import EventQueue
from perfcast.serve._kv import KVCache, plan_memory
from perfcast.serve._metrics import ServeResult, StepLog, WeightedHistogram
from perfcast.serve._prefix import PrefixCache
from perfcast.serve._schedulers import make_scheduler
from perfcast.serve._spec import SpecDecoding, expected_tokens, spec_memory
from perfcast.serve._state import Replica, Requests
from perfcast.serve._step_model import StepTimeModel
from perfcast.serve._stepper import Stepper
from perfcast.specs import Cluster, get_stack

__all__ = ["simulate", "step_model_for"]

STEP_END, ARRIVAL, WAKE = 0, 1, 2
REPORT_EVERY = 1000  # completed requests between two progress reports
def step_model_for(config: ServeConfig, time_model: ExecutionTimeModel | None = None,
                   cluster: Cluster | None = None) -> ServingStepModel:
    """The step-time model of one replica (reuse it across simulations of one deployment);
    kernels priced by `time_model`, by default the config's `kernel_model` (the shipped
    calibration, or the learned model over it), on `cluster` (the config's by default;
    co-location passes a partitioned one)."""
    budget = config.token_budget if config.scheduler != "orca" else \
        config.max_batch_tokens or config.max_batch * config.context_limit
    budget = max(budget, config.max_batch * (1 + config.spec_k))  # verification tokens
    time_model = time_model or kernel_time_model(config)
    if config.stack is not None:
        time_model = stack_kernel_model(get_stack(config.stack), time_model)
    return ServingStepModel(config.model_spec, cluster or config.cluster_spec, config.precision,
                            config.plan, time_model,
                            config.execution,
                            config.host, host_overlap=config.host_overlap,
                            comm_model=CustomAllReduce() if config.allreduce == "custom"
                            else RingAlphaBeta(),
                            max_tokens=min(max(budget, 16), 1 << 22),
                            max_seqs=config.max_batch, max_context=config.context_limit,
                            prefill_dispatch_s=config.prefill_dispatch,
                            host_speed=config.host_speed)


def kernel_time_model(config: ServeConfig) -> ExecutionTimeModel:
    """The shipped kernel model `config.kernel_model` names (one instance each, so step
    models of one deployment share it)."""
    return learned_time_model() if config.kernel_model == "learned" else default_time_model()


def _draft_model(config: ServeConfig) -> ServingStepModel | None:
    """The draft model's step model on the target's GPUs and plan (None: draft-free)."""
    if config.spec_draft_model is None:
        return None
    fields = config.model_dump(exclude={"model"}) | {
        "model": config.spec_draft_model, "spec_k": 0, "spec_draft_model": None,
        "prefix_caching": False, "max_context": config.context_limit}
    return step_model_for(ServeConfig(**fields))


def simulate(config: ServeConfig, workload, *, seed: int = 0,
             step_model: StepTimeModel | None = None, timeline: bool = False) -> ServeResult:
    """Serve `workload` (a `Workload`) on `config`'s deployment. `seed` drives the routers'
    tie-breaks; `timeline` keeps every step (for timelines and the trace); `step_model`
    prices the steps (default `step_model_for(config)`)."""
    return _Simulation(config, workload, seed, step_model, timeline).run()


class _Simulation:
    def __init__(self, config: ServeConfig, workload, seed: int,
                 step_model: StepTimeModel | None, timeline: bool, queue=None, device=None):
        self.config = config
        self.memory = spec_memory(config, plan_memory(config))
        self.req = Requests(workload.arrival_s, workload.prompt_tokens, workload.output_tokens,
                            workload.prefix_group, workload.prefix_tokens,
                            workload.preloaded_tokens)
        self.concurrency = workload.concurrency
        # open-loop arrivals replay `stream` in order; a session's later turns arrive when
        # the client sees their previous turn complete (+ think time)
        follows = workload.follows
        self.stream = (np.flatnonzero(follows < 0).tolist() if workload.has_sessions
                       else range(len(self.req)))
        self.next_turns: dict[int, list[int]] = {}
        if workload.has_sessions:
            for rid in np.flatnonzero(follows >= 0).tolist():
                self.next_turns.setdefault(int(follows[rid]), []).append(rid)
        self.think_s = workload.think_s
        self.follow_ids = {r for turns in self.next_turns.values() for r in turns}
        _check(config, self.req, self.memory.blocks - int(config.watermark * self.memory.blocks))
        self.scheduler = make_scheduler(config, self.req)
        self.replicas = [Replica(i, KVCache(config, self.memory), self.scheduler.reserves_kv)
                         for i in range(config.replicas)]
        if config.prefix_caching:
            for rep in self.replicas:
                rep.prefix = PrefixCache(rep.kv)
        self.logs = [StepLog(timeline) for _ in self.replicas]
        cost = StepCost(config, step_model or step_model_for(config))
        spec = SpecDecoding(config, _draft_model(config), seed) if config.spec_k else None
        self.stepper = Stepper(self.req, self.scheduler, cost, self.logs,
                               output_lag=config.host_overlap, spec=spec)
        self.queue = EventQueue() if queue is None else queue  # co-location: a shared view
        self.device = device  # co-location by time-slicing: the GPU the models take turns on
        self.rng = np.random.default_rng(seed)
        self.next_rid = 0
        self.rr = 0

    def run(self) -> ServeResult:
        self.begin()
        q, report = self.queue, current_progress()
        if report is None:
            while len(q):
                self.handle(*q.pop())
            return self.result()
        n, next_at = len(self.req), REPORT_EVERY
        while len(q):
            self.handle(*q.pop())
            if self.req.completions >= next_at:
                report(self.req.completions, n)
                next_at = self.req.completions + REPORT_EVERY
        report(self.req.completions, n)
        return self.result()

    def begin(self) -> None:
        n = len(self.req)
        for _ in range(min(self.concurrency or 1, n)):
            self._submit(0.0 if self.concurrency else self.req.arrival_s[self.stream[0]])

    def handle(self, t: float, kind: int, payload) -> None:
        if kind == STEP_END:
            rep, generation = payload
            if generation == rep.generation:
                self._finished(rep, t)
        elif kind == ARRIVAL:
            self._arrive(payload, t)
        else:
            payload.wake_pending = False
            if not payload.busy:
                self._start(payload, t)

    def result(self) -> ServeResult:
        n = len(self.req)
        if self.req.completions != n:
            raise RuntimeError(f"simulation stalled: {self.req.completions} of {n} completed")
        return _result(self)

    def cut(self, rep: Replica, t: float) -> None:
        """End the replica's run at its first step ending at or after `t`."""
        end = self.stepper.cut(rep, t)
        if end is not None:
            rep.generation += 1
            self.queue.push(end, STEP_END, (rep, rep.generation))

    def wake(self, rep: Replica, t: float) -> None:
        if not rep.wake_pending:
            rep.wake_pending = True
            self.queue.push(t, WAKE, rep)

    def _submit(self, t: float) -> None:
        if self.next_rid < len(self.stream):
            self.queue.push(t, ARRIVAL, self.stream[self.next_rid])
            self.next_rid += 1

    def _seen(self, rid: int, t: float) -> None:
        """The client saw request `rid` complete at `t`: closed loop, or the next turn."""
        if self.concurrency:
            self._submit(t)
        for turn in self.next_turns.get(rid, ()):
            self.queue.push(t + float(self.think_s[turn]), ARRIVAL, turn)

    def _arrive(self, rid: int, t: float) -> None:
        req = self.req
        if self.concurrency or rid in self.follow_ids:
            req.arrival_s[rid] = t
        elif self.next_rid < len(self.stream):
            self._submit(req.arrival_s[self.stream[self.next_rid]])
        rep = self._route()
        req.replica[rid] = rep.index
        rep.waiting.append(rid)
        if rep.busy:
            self.cut(rep, t)
        else:
            self.wake(rep, t)

    def _route(self) -> Replica:
        reps = self.replicas
        if len(reps) == 1:
            return reps[0]
        if self.config.router == "round-robin":
            self.rr += 1
            return reps[(self.rr - 1) % len(reps)]
        if self.config.router == "least-outstanding":
            load = [r.outstanding() for r in reps]
        else:
            load = [r.kv.used / r.kv.capacity + 1e-9 * r.outstanding() for r in reps]
        best = min(load)
        ties = [r for r, x in zip(reps, load, strict=True) if x == best]
        return ties[int(self.rng.integers(len(ties)))] if len(ties) > 1 else ties[0]

    def _start(self, rep: Replica, t: float) -> None:
        device = self.device
        if device is not None and not device.acquire(self, rep, t):
            return  # another model holds the GPU; it wakes this replica when done
        horizon = float("inf")
        if (not self.concurrency and self.next_rid < len(self.stream)) or self.next_turns:
            horizon = self.queue.peek_time_s()
        end = self.stepper.start(rep, t, horizon)
        for rid, seen_s in self.stepper.drain_reported():  # output_lag: completions seen now
            self._seen(rid, seen_s)
        if end is None:
            if device is not None:
                device.release(t)
            if rep.waiting or rep.swapped:
                raise RuntimeError(f"replica {rep.index} idle with queued requests")
            return
        if device is not None:
            device.hold(self, rep)
        rep.busy = True
        rep.generation += 1
        self.queue.push(end, STEP_END, (rep, rep.generation))

    def _finished(self, rep: Replica, t: float) -> None:
        if self.device is not None:
            self.device.release(t)
        for rid, _ in self.stepper.finish(rep):
            self._seen(rid, t)
        rep.busy = False
        if self.queue.peek_time_s() > t:  # its wake-up would be the very next event: run it
            self._start(rep, t)
            return
        rep.wake_pending = True
        self.queue.push(t, WAKE, rep)


def _check(config: ServeConfig, req: Requests, admit_blocks: int) -> None:
    """Refuse requests this deployment could never serve (they would stall it)."""
    total = np.asarray(req.prompt) + np.asarray(req.output)
    worst = int(total.max())
    if worst > config.context_limit:
        raise InputError("max_context", f"a request needs {worst} tokens, more than the "
                         f"context limit {config.context_limit}", f">= {worst}")
    need = -(-worst // config.block_size)
    if need > admit_blocks:
        raise InputError("gpu_memory_utilization", f"a request of {worst} tokens needs {need} "
                         f"KV blocks; only {admit_blocks} can be admitted",
                         "more memory, or shorter requests")
    if config.scheduler in ("vllm-v0", "orca", "static"):
        longest = worst - 1 if config.scheduler == "vllm-v0" else int(max(req.prompt))
        if longest > config.token_budget:
            raise InputError("max_batch_tokens", f"{config.scheduler} prefills whole prompts "
                             f"(up to {longest} tokens) but the budget is "
                             f"{config.token_budget}", f">= {longest}")


def _result(sim: _Simulation) -> ServeResult:
    r = sim.req
    col = r.column
    arrival, first, done = col(r.arrival_s), col(r.first_token_s), col(r.completion_s)
    out = col(r.output)
    tpot = np.where(out > 1, (done - first) / np.maximum(out - 1, 1), np.nan)
    ints = {name: col(values).astype(np.int64) for name, values in (
        ("replica", r.replica), ("prompt_tokens", r.prompt), ("output_tokens", r.output),
        ("generated_tokens", r.generated), ("preemptions", r.preemptions),
        ("restarts", r.restarts), ("prefix_hit_tokens", r.prefix_hit))}
    requests = pd.DataFrame({
        "id": np.arange(len(r)), "replica": ints["replica"], "arrival_s": arrival,
        "first_token_s": first, "completion_s": done,
        "prompt_tokens": ints["prompt_tokens"], "output_tokens": ints["output_tokens"],
        "generated_tokens": ints["generated_tokens"],
        "queueing_delay_s": col(r.scheduled_s) - arrival,
        "preemptions": ints["preemptions"], "restarts": ints["restarts"],
        "ttft_s": first - arrival, "tpot_s": tpot, "e2e_s": done - arrival,
        "prefix_hit_tokens": ints["prefix_hit_tokens"]},
        copy=False)  # no consolidating copy; the float columns share the finished state's memory
    logs = sim.logs
    replicas = pd.DataFrame([{"replica": i, "busy_s": g.busy_s, "steps": g.steps,
                              "util_area": g.util_area, "frag_area": g.frag_area,
                              "frag_s": g.frag_s, "kv_peak_blocks": rep.kv.peak_used,
                              "prefix_lookup_tokens": rep.prefix.lookup_tokens
                              if rep.prefix is not None else 0,
                              "spec_steps": g.spec_steps, "spec_tokens": g.spec_tokens}
                             for i, (g, rep) in enumerate(zip(logs, sim.replicas, strict=True))])
    itl_values, itl_weights = WeightedHistogram.merged([g.itl for g in logs])
    timelines = ({i: g.frame() for i, g in enumerate(logs)}
                 if logs[0].timeline is not None else None)
    return ServeResult(requests, replicas, itl_values, itl_weights, timelines,
                       sim.memory.blocks, sim.config.prefix_caching,
                       expected_tokens(sim.config.spec_rates) if sim.config.spec_k else None,
                       sim.memory)
