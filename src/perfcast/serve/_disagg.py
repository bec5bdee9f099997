"""Disaggregated serving: a prefill pool computes each prompt's KV and first token, the KV
moves over a link to a decode pool, which generates the rest (DistServe, Splitwise;
vLLM/SGLang/Dynamo P/D). Each pool is a serve simulation of its own (replicas, scheduler,
paged KV, queueing); the link between them is a FIFO per prefill replica.

- Prefill pool: the workload with one output token per request.
- KV transfer: the prompt's KV (all layers, every TP shard; `kv_bytes_per_token` at TP 1)
  and, for recurrent layers, each sequence's state (`state_bytes_per_sequence`),
  sent over min(prefill TP, decode TP) GPU pairs in parallel: latency + bytes / (pairs x
  link bandwidth x efficiency), queued behind the replica's earlier transfers. The link is
  the decode cluster's network level, or its intra-node level when both pools fit one node.
- Decode pool: each request arrives when its KV has, with the prompt and first token cached
  (`preloaded_tokens`: its first step computes the first token's KV and yields the second).
- The first token reaches the client with the KV, from the decode side (SGLang's and
  vLLM's P/D designs): TTFT ends at the transfer's end.
- A closed loop (a benchmark client keeping `concurrency` requests in flight) couples both
  pools: client slot k sends requests k, k + C, k + 2C, ..., each when the slot's previous one
  completed. Both pools then run as one discrete-event simulation on a shared event queue
  (as co-located models do): a prefill completion queues its KV transfer, the transfer's end
  is the decode arrival, a decode completion sends the slot's next request. This is the
  fixed point of open-loop runs (one run's completions are the next run's arrivals) reached
  in one pass, since a request's arrival depends only on earlier completions.

A pool's deployment is a `PoolLayout`: `workers` engine instances (Dynamo's workers), each
TP x PP x attention-DP GPUs with experts over EP x MoE-TP of them, and the pool's own batch
limits. Written `2x(tp8,ep8,dp8,batch256)` (compact) or `2x4` (2 workers of TP 4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.ops import kv_bytes_per_token, state_bytes_per_sequence
from perfcast.progress import current as current_progress
from perfcast.serve._colocate import _run_shared, _View
from perfcast.serve._config import PAGED, ServeConfig
from perfcast.serve._engine import (
    ARRIVAL,
    REPORT_EVERY,
    _Simulation,
    simulate,
)
from perfcast.serve._events import EventQueue
from perfcast.serve._metrics import ServeResult, _stats
from perfcast.serve._pools import POOL_KEYS, PoolLayout
from perfcast.serve._step_model import StepTimeModel
from perfcast.serve._workload import Workload
from perfcast.specs import Link, ParallelPlan

__all__ = ["DisaggResult", "POOL_KEYS", "PoolLayout", "decode_pool", "simulate_disaggregated"]

@dataclass(frozen=True, eq=False)
class DisaggResult:
    """Per request: arrival, prefill done, KV transfer start/end, completion, and the
    client's TTFT/TPOT/E2E; plus each pool's own ServeResult."""

    requests: pd.DataFrame
    prefill: ServeResult
    decode: ServeResult | None
    link: Link

    def summary(self, ttft_slo_s: float | None = None, tpot_slo_s: float | None = None
                ) -> dict:
        r = self.requests
        dur = float(r["completion_s"].max() - r["arrival_s"].min())
        out = {"num_requests": len(r), "ttft_s": _stats(r["ttft_s"].to_numpy()),
               "tpot_s": _stats(r["tpot_s"].dropna().to_numpy()),
               "e2e_s": _stats(r["e2e_s"].to_numpy()),
               "kv_transfer_s": _stats(r["kv_transfer_s"].to_numpy()),
               "kv_transfer_wait_s": _stats(r["kv_wait_s"].to_numpy()),
               "throughput_req_s": len(r) / dur,
               "throughput_tok_s": float(r["output_tokens"].sum()) / dur,
               "duration_s": dur,
               "prefill_pool": _pool(self.prefill),
               "decode_pool": _pool(self.decode) if self.decode is not None else None}
        if ttft_slo_s is not None and tpot_slo_s is not None:
            ok = (r["ttft_s"] <= ttft_slo_s) & ~(r["tpot_s"] > tpot_slo_s)
            out["goodput_req_s"] = float(ok.sum()) / dur
        return out


def _pool(result: ServeResult) -> dict:
    s = result.summary()
    return {k: s[k] for k in ("preemptions", "restarts", "kv_utilisation_mean", "kv_blocks",
                              "steps", "queueing_s")}


def _link(prefill: ServeConfig, decode: ServeConfig) -> Link:
    cluster = decode.cluster_spec
    gpus = prefill.tp * prefill.pp * prefill.replicas + decode.tp * decode.pp * decode.replicas
    if gpus <= cluster.gpus_per_node or cluster.inter_node is None:
        return cluster.intra_node
    return cluster.inter_node


def _check(prefill: ServeConfig, decode: ServeConfig, workload: Workload) -> None:
    if prefill.model_spec.name != decode.model_spec.name:
        raise InputError("decode", f"the pools serve different models ({prefill.model_spec.name}"
                         f" and {decode.model_spec.name})", "the same model")
    if decode.scheduler not in PAGED:  # a decode pool takes KV computed elsewhere
        raise InputError("decode.scheduler", f"{decode.scheduler!r} cannot take requests "
                         "whose KV was computed elsewhere", PAGED)
    if workload.has_sessions:
        raise InputError("workload", "disaggregated runs take requests without sessions "
                         "(chats are not modelled across pools)")


def simulate_disaggregated(prefill: ServeConfig, decode: ServeConfig, workload: Workload, *,
                           link: Link | None = None, seed: int = 0,
                           prefill_step_model: StepTimeModel | None = None,
                           decode_step_model: StepTimeModel | None = None) -> DisaggResult:
    """Serve `workload` with prefill and decode on separate pools (module docstring); step
    models as `simulate` takes them (built from each pool's config by default). A closed-loop
    workload (`concurrency` set) is solved as the module docstring says."""
    _check(prefill, decode, workload)
    decode = decode_pool(decode)
    link = link or _link(prefill, decode)
    models = {"prefill_step_model": prefill_step_model, "decode_step_model": decode_step_model}
    if workload.concurrency is not None:
        return _closed_loop(prefill, decode, workload, link, seed, models)
    return _open_loop(prefill, decode, workload, link, seed, **models)


def decode_pool(config: ServeConfig) -> ServeConfig:
    """`config` as a decode pool runs it: its requests arrive with their KV, so each one's
    first step (a one-token step on the cached prompt here) is a decode the engine replays
    from a CUDA graph, not a Python-dispatched prefill (prefill_dispatch_s 0)."""
    if config.prefill_dispatch == 0.0:
        return config
    return ServeConfig(**(config.model_dump() | {"prefill_dispatch_s": 0.0}))


def _closed_loop(prefill: ServeConfig, decode: ServeConfig, workload: Workload, link: Link,
                 seed: int, models: dict) -> DisaggResult:
    """The closed loop as one simulation of both pools on a shared event queue (module
    docstring); requests reported in the order the prefill pool saw them arrive (by time,
    then as sent), the order an open-loop run of their arrival times takes them in."""
    loop = _Loop(prefill, decode, workload, link, seed, models)
    loop.run()
    return loop.result()


class _Pool(_Simulation):
    """A pool's simulation whose requests arrive when sent (`send`), not at the workload's
    times, and whose completions, as the client sees them, go to `seen(rid, t)`."""

    def __init__(self, config: ServeConfig, workload: Workload, seed: int,
                 step_model: StepTimeModel | None, queue: _View, seen):
        super().__init__(config, workload, seed, step_model, False, queue=queue)
        queue.sim = self
        self.stream = ()  # no arrivals of its own: every one is sent
        self.seen = seen
        self.sent: list[int] = []  # request ids in the order sent

    def send(self, rid: int, t: float) -> None:
        self.req.arrival_s[rid] = t
        self.sent.append(rid)
        self.queue.push(t, ARRIVAL, rid)

    def _seen(self, rid: int, t: float) -> None:
        self.seen(rid, t)


class _Loop:
    """Client slots, prefill pool, KV links and decode pool of one closed-loop run."""

    def __init__(self, prefill: ServeConfig, decode: ServeConfig, workload: Workload,
                 link: Link, seed: int, models: dict):
        n, self.conc = len(workload), workload.concurrency
        self.prompt, self.output = workload.prompt_tokens, workload.output_tokens
        self.seconds = _transfer_s(prefill, decode, link, self.prompt)
        self.link, self.links = link, _Links()
        self.start, self.end = np.full(n, np.nan), np.full(n, np.nan)
        self.queue = EventQueue()
        self.report, self.completed = current_progress(), 0
        first = Workload(np.zeros(n), self.prompt, np.ones(n, dtype=np.int64))
        self.pre = _Pool(prefill, first, seed, models["prefill_step_model"],
                         _View(self.queue), self._prefilled)
        self.more = np.flatnonzero(self.output > 1)
        self.dec_id = np.full(n, -1)
        self.dec_id[self.more] = np.arange(len(self.more))
        self.dec = None
        if len(self.more):
            m = self.more
            w = Workload(np.zeros(len(m)), self.prompt[m] + 1, self.output[m] - 1,
                         preloaded_tokens=self.prompt[m])
            self.dec = _Pool(decode, w, seed, models["decode_step_model"],
                             _View(self.queue), self._decoded)

    def run(self) -> None:
        """Every slot's first request at 0, then events in time order until all are done;
        progress reported as `simulate` reports it (every REPORT_EVERY completions)."""
        for rid in range(min(self.conc, len(self.prompt))):
            self.pre.send(rid, 0.0)
        _run_shared(self.queue)
        if self.report is not None:
            self.report(self.completed, len(self.prompt))

    def _prefilled(self, rid: int, t: float) -> None:
        """KV ready: its transfer queues on the replica's link; then decode, or done."""
        s, e = self.links.send(t, float(self.seconds[rid]), int(self.pre.req.replica[rid]))
        self.start[rid], self.end[rid] = s, e
        if self.dec_id[rid] >= 0:
            self.dec.send(int(self.dec_id[rid]), e)
        else:
            self._done(rid, t)

    def _decoded(self, did: int, t: float) -> None:
        self._done(int(self.more[did]), t)

    def _done(self, rid: int, t: float) -> None:
        """The client slot of `rid` sends its next request."""
        if rid + self.conc < len(self.prompt):
            self.pre.send(rid + self.conc, t)
        self.completed += 1
        if self.report is not None and self.completed % REPORT_EVERY == 0:
            self.report(self.completed, len(self.prompt))

    def result(self) -> DisaggResult:
        pre = self.pre.result()
        ready = pre.requests["completion_s"].to_numpy()
        done = ready.copy()
        dec = self.dec.result() if self.dec is not None else None
        if dec is not None:
            done[self.more] = dec.requests["completion_s"].to_numpy()
        frame = _frame(pre.requests["arrival_s"].to_numpy(), ready, self.start, self.end,
                       done, self.prompt, self.output, self.seconds)
        frame = frame.iloc[self.pre.sent].sort_values("arrival_s", kind="stable",
                                                      ignore_index=True)
        return DisaggResult(frame.assign(id=np.arange(len(frame))), pre, dec, self.link)


def _transfer_s(prefill: ServeConfig, decode: ServeConfig, link: Link, prompt: np.ndarray
                ) -> np.ndarray:
    """Each request's KV transfer (module docstring): latency + KV and state bytes over
    min(prefill TP, decode TP) GPU pairs."""
    per_token = kv_bytes_per_token(prefill.model_spec, prefill.precision, ParallelPlan())
    state = state_bytes_per_sequence(prefill.model_spec, prefill.precision, ParallelPlan())
    pairs = min(prefill.tp, decode.tp)
    return link.latency_s + (prompt * per_token + state) / (pairs * link.bandwidth_bps
                                                            * link.bus_efficiency)


def _open_loop(prefill: ServeConfig, decode: ServeConfig, workload: Workload, link: Link,
               seed: int, prefill_step_model: StepTimeModel | None = None,
               decode_step_model: StepTimeModel | None = None) -> DisaggResult:
    """Requests arriving at their times through both pools and the link between them."""
    n = len(workload)
    first = Workload(workload.arrival_s, workload.prompt_tokens, np.ones(n, dtype=np.int64))
    pre = simulate(prefill, first, seed=seed, step_model=prefill_step_model)
    ready = pre.requests["completion_s"].to_numpy()
    prompt = workload.prompt_tokens
    seconds = _transfer_s(prefill, decode, link, prompt)
    start, end = _fifo(ready, seconds, pre.requests["replica"].to_numpy())
    output = workload.output_tokens
    more = np.flatnonzero(output > 1)
    done = ready.copy()
    dec = None
    if len(more):
        order = more[np.argsort(end[more], kind="stable")]
        w = Workload(end[order], prompt[order] + 1, output[order] - 1,
                     preloaded_tokens=prompt[order])
        dec = simulate(decode, w, seed=seed, step_model=decode_step_model)
        done[order] = dec.requests["completion_s"].to_numpy()
    requests = _frame(workload.arrival_s, ready, start, end, done, prompt, output, seconds)
    return DisaggResult(requests, pre, dec, link)


def _frame(arrival: np.ndarray, ready: np.ndarray, start: np.ndarray, end: np.ndarray,
           done: np.ndarray, prompt: np.ndarray, output: np.ndarray, seconds: np.ndarray
           ) -> pd.DataFrame:
    """Per request: its times through both pools and the client's TTFT/TPOT/E2E (TTFT ends
    with the KV transfer; TPOT over the decode pool's tokens)."""
    tpot = np.where(output > 1, (done - end) / np.maximum(output - 1, 1), np.nan)
    return pd.DataFrame({
        "id": np.arange(len(arrival)), "arrival_s": arrival, "prefill_done_s": ready,
        "kv_start_s": start, "kv_end_s": end, "completion_s": done,
        "prompt_tokens": prompt, "output_tokens": output, "kv_transfer_s": seconds,
        "kv_wait_s": start - ready, "ttft_s": end - arrival, "tpot_s": tpot,
        "e2e_s": done - arrival})


class _Links:
    """One KV link per prefill replica, first come first served."""

    def __init__(self):
        self.free: dict[int, float] = {}

    def send(self, ready: float, seconds: float, replica: int) -> tuple[float, float]:
        """(start, end) of a transfer of `seconds` whose KV is ready at `ready`."""
        s = max(ready, self.free.get(replica, 0.0))
        self.free[replica] = s + seconds
        return s, s + seconds


def _fifo(ready: np.ndarray, seconds: np.ndarray, replica: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray]:
    """Transfers through one link per prefill replica, in the order their KV is ready."""
    start, end = np.empty_like(ready), np.empty_like(ready)
    links = _Links()
    for i in np.argsort(ready, kind="stable").tolist():
        start[i], end[i] = links.send(float(ready[i]), float(seconds[i]), int(replica[i]))
    return start, end
