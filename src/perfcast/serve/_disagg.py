"""Disaggregated serving: a prefill pool computes each prompt's KV and first token, the KV
moves over a link to a decode pool, which generates the rest (DistServe, Splitwise;
vLLM/SGLang/Dynamo P/D). Each pool is a serve simulation of its own (replicas, scheduler,
paged KV, queueing); the link between them is a FIFO per prefill replica.

- Prefill pool: the workload with one output token per request.
- KV transfer: the prompt's KV (all layers, every TP shard; `kv_bytes_per_token` at TP 1),
  sent over min(prefill TP, decode TP) GPU pairs in parallel: latency + bytes / (pairs x
  link bandwidth x efficiency), queued behind the replica's earlier transfers. The link is
  the decode cluster's network level, or its intra-node level when both pools fit one node.
- Decode pool: each request arrives when its KV has, with the prompt and first token cached
  (`preloaded_tokens`: its first step computes the first token's KV and yields the second).
- The first token reaches the client with the KV, from the decode side (SGLang's and
  vLLM's P/D designs): TTFT ends at the transfer's end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.ops import kv_bytes_per_token
from perfcast.serve._config import ServeConfig
from perfcast.serve._engine import simulate
from perfcast.serve._metrics import ServeResult, _stats
from perfcast.serve._step_model import StepTimeModel
from perfcast.serve._workload import Workload
from perfcast.specs import Link, ParallelPlan

__all__ = ["DisaggResult", "simulate_disaggregated"]

_PAGED = ("vllm-v0", "vllm-v1", "sarathi")


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
    if decode.scheduler not in _PAGED:
        raise InputError("decode.scheduler", f"{decode.scheduler!r} cannot take requests "
                         "whose KV was computed elsewhere", _PAGED)
    if workload.concurrency is not None or workload.has_sessions:
        raise InputError("workload", "disaggregated runs take open-loop arrivals (no closed "
                         "loop, no sessions)")


def simulate_disaggregated(prefill: ServeConfig, decode: ServeConfig, workload: Workload, *,
                           link: Link | None = None, seed: int = 0,
                           prefill_step_model: StepTimeModel | None = None,
                           decode_step_model: StepTimeModel | None = None) -> DisaggResult:
    """Serve `workload` with prefill and decode on separate pools (module docstring); step
    models as `simulate` takes them (built from each pool's config by default)."""
    _check(prefill, decode, workload)
    link = link or _link(prefill, decode)
    n = len(workload)
    first = Workload(workload.arrival_s, workload.prompt_tokens, np.ones(n, dtype=np.int64))
    pre = simulate(prefill, first, seed=seed, step_model=prefill_step_model)
    ready = pre.requests["completion_s"].to_numpy()
    prompt = workload.prompt_tokens
    per_token = kv_bytes_per_token(prefill.model_spec, prefill.precision, ParallelPlan())
    pairs = min(prefill.tp, decode.tp)
    seconds = link.latency_s + prompt * per_token / (pairs * link.bandwidth_bps
                                                     * link.bus_efficiency)
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
    arrival = workload.arrival_s
    ttft = end - arrival
    tpot = np.where(output > 1, (done - end) / np.maximum(output - 1, 1), np.nan)
    requests = pd.DataFrame({
        "id": np.arange(n), "arrival_s": arrival, "prefill_done_s": ready,
        "kv_start_s": start, "kv_end_s": end, "completion_s": done,
        "prompt_tokens": prompt, "output_tokens": output, "kv_transfer_s": seconds,
        "kv_wait_s": start - ready, "ttft_s": ttft, "tpot_s": tpot, "e2e_s": done - arrival})
    return DisaggResult(requests, pre, dec, link)


def _fifo(ready: np.ndarray, seconds: np.ndarray, replica: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray]:
    """Transfers through one link per prefill replica, in the order their KV is ready."""
    start, end = np.empty_like(ready), np.empty_like(ready)
    free: dict[int, float] = {}
    for i in np.argsort(ready, kind="stable").tolist():
        s = max(float(ready[i]), free.get(int(replica[i]), 0.0))
        start[i], end[i] = s, s + float(seconds[i])
        free[int(replica[i])] = end[i]
    return start, end
