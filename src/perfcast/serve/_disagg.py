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
  completed. It is solved as a fixed point of open-loop runs: one run's completions are the
  next run's arrivals until mean TTFT and TPOT move less than CLOSED_LOOP_TOLERANCE (single
  arrival times keep jittering as batch boundaries shift; the means settle in 2-4 sweeps).

A pool's deployment is a `PoolLayout`: `workers` engine instances (Dynamo's workers), each
TP x PP x attention-DP GPUs with experts over EP x MoE-TP of them, and the pool's own batch
limits. Written `2x(tp8,ep8,dp8,batch256)` (compact) or `2x4` (2 workers of TP 4).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from perfcast.errors import InputError
from perfcast.ops import kv_bytes_per_token, state_bytes_per_sequence
from perfcast.serve._config import ServeConfig
from perfcast.serve._engine import simulate, step_model_for
from perfcast.serve._metrics import ServeResult, _stats
from perfcast.serve._step_model import StepTimeModel
from perfcast.serve._workload import Workload
from perfcast.specs import Link, ParallelPlan

__all__ = ["DisaggResult", "POOL_KEYS", "PoolLayout", "simulate_disaggregated"]

_PAGED = ("vllm-v0", "vllm-v1", "sarathi")
CLOSED_LOOP_SWEEPS, CLOSED_LOOP_TOLERANCE = 8, 0.005
MAX_POOL_GPUS = 1_000_000  # as the API's MAX_GPUS: a typo's bound, not a modelling limit
# Compact keys -> PoolLayout fields (the field names themselves are accepted too).
POOL_KEYS = {"tp": "tp", "pp": "pp", "dp": "attention_dp", "ep": "ep", "moe_tp": "moe_tp",
             "batch": "max_batch", "tokens": "max_batch_tokens"}
_SHORT = {field: key for key, field in POOL_KEYS.items()}
_ITEM = re.compile(r"^([a-z_]+?)=?(\d+)$")
POOL_FORMS = ("WORKERSxTP (e.g. 2x4)", "WORKERSx(tp8,ep8,dp8,moe_tp1,batch256,tokens8192) "
              "(any of the keys; = optional: tp=8)")


class PoolLayout(BaseModel):
    """One pool of a disaggregated deployment: `workers` engine instances, each `tp` x `pp` x
    `attention_dp` GPUs; MoE experts split over `ep` ranks x `moe_tp` (None: tp x
    attention_dp / ep, the engines' default, AIConfigurator's moe_tp x moe_ep = tp x
    attention_dp); `max_batch` sequences per attention-DP rank and `max_batch_tokens` per
    step (None: the deployment's engine settings). Every attention-DP rank is a replica of
    the pool (workers x attention_dp replicas behind its router)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workers: int = Field(1, ge=1, le=MAX_POOL_GPUS, description="engine instances")
    tp: int = Field(1, ge=1, le=MAX_POOL_GPUS, description="attention tensor parallelism")
    pp: int = Field(1, ge=1, le=MAX_POOL_GPUS, description="pipeline stages")
    ep: int = Field(1, ge=1, le=MAX_POOL_GPUS, description="expert-parallel ranks")
    attention_dp: int = Field(1, ge=1, le=MAX_POOL_GPUS, description="attention-DP ranks")
    moe_tp: int | None = Field(None, ge=1, le=MAX_POOL_GPUS, description="TP of each expert")
    max_batch: int | None = Field(None, ge=1, le=MAX_POOL_GPUS, description="sequences per "
                                  "attention-DP rank per step")
    max_batch_tokens: int | None = Field(None, ge=1, le=10_000_000, description="tokens per "
                                         "step")

    @model_validator(mode="before")
    @classmethod
    def _compact(cls, value: Any) -> Any:
        return _parse(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _experts(self) -> PoolLayout:
        """Experts fill the worker's tp x attention_dp GPUs: ep divides them, and
        moe_tp x ep (when given) equals them."""
        ranks = self.tp * self.attention_dp
        if ranks % self.ep:
            raise ValueError(f"ep {self.ep} must divide tp x dp = {ranks}")
        if self.moe_tp is not None and self.moe_tp * self.ep != ranks:
            raise ValueError(f"moe_tp x ep = {self.moe_tp} x {self.ep} must equal tp x dp = "
                             f"{ranks} (every GPU of a worker holds one expert shard)")
        return self

    @classmethod
    def parse(cls, value: Any, field: str) -> PoolLayout:
        """A layout from its compact text, a mapping of its fields, or itself; a bad one is
        an InputError naming `field`."""
        if isinstance(value, PoolLayout):
            return value
        try:
            return cls.model_validate(value)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            msg = err["msg"].removeprefix("Value error, ")
            raise InputError(field, f"{value!r}: {where + ': ' if where else ''}{msg}",
                             POOL_FORMS) from None

    @property
    def replicas(self) -> int:
        """Replicas behind the pool's router: one per attention-DP rank of every worker."""
        return self.workers * self.attention_dp

    @property
    def gpus(self) -> int:
        return self.workers * self.tp * self.pp * self.attention_dp

    def config(self, base: ServeConfig) -> ServeConfig:
        """`base` (model, GPU, scheduler, ...) deployed as this pool; its batch limits where
        the pool sets none."""
        fields = {"tp": self.tp, "pp": self.pp, "ep": self.ep, "moe_tp": self.moe_tp,
                  "attention_dp": self.attention_dp, "replicas": self.replicas}
        for name in ("max_batch", "max_batch_tokens"):
            if getattr(self, name) is not None:
                fields[name] = getattr(self, name)
        return ServeConfig(**(base.model_dump() | fields))

    def __str__(self) -> str:
        """The compact form `parse` reads back: `2x4` for workers x TP alone, else
        `2x(tp8,ep8,dp8,...)` with the fields that are not their defaults."""
        set_ = {k: v for k, v in self.model_dump(exclude_defaults=True).items()
                if k != "workers"}
        if set(set_) <= {"tp"}:
            return f"{self.workers}x{self.tp}"
        items = ",".join(f"{key}{set_[field]}" for key, field in POOL_KEYS.items()
                         if field in set_)
        return f"{self.workers}x({items})"


def _parse(text: str) -> dict[str, Any]:
    """`2x4` -> workers 2, tp 4; `2x(tp8,ep8,dp8)` or `(tp8,ep8)` (one worker) -> fields."""
    raw = text.strip().lower().replace(" ", "")
    head, sep, rest = raw.partition("x")
    if sep and head.isdigit() and rest.isdigit():
        return {"workers": int(head), "tp": int(rest)}
    if not (sep and head.isdigit()):
        head, rest = "1", raw
    rest = rest.removeprefix("(").removesuffix(")")
    fields: dict[str, Any] = {"workers": int(head)}
    for item in filter(None, rest.split(",")):
        match = _ITEM.match(item)
        key = match and POOL_KEYS.get(match[1], match[1] if match[1] in _SHORT else None)
        if not key or key in fields:
            raise ValueError(f"{item!r} is not one of {', '.join(POOL_KEYS)} with a number"
                             + (" (given twice)" if key else ""))
        fields[key] = int(match[2])
    if len(fields) == 1:
        raise ValueError(f"expected {POOL_FORMS[0]} or {POOL_FORMS[1]}")
    return fields


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
    link = link or _link(prefill, decode)
    models = {"prefill_step_model": prefill_step_model, "decode_step_model": decode_step_model}
    if workload.concurrency is not None:
        return _closed_loop(prefill, decode, workload, link, seed, models)
    return _open_loop(prefill, decode, workload, link, seed, **models)


def _closed_loop(prefill: ServeConfig, decode: ServeConfig, workload: Workload, link: Link,
                 seed: int, models: dict) -> DisaggResult:
    """The closed loop as a fixed point of open-loop runs (module docstring); each pool's
    step model built once for every sweep."""
    models = {"prefill_step_model": models["prefill_step_model"] or step_model_for(prefill),
              "decode_step_model": models["decode_step_model"] or step_model_for(decode)}
    conc, n = workload.concurrency, len(workload)
    prompt, output = workload.prompt_tokens, workload.output_tokens
    arrival, last = np.zeros(n), None
    for _ in range(CLOSED_LOOP_SWEEPS):
        order = np.argsort(arrival, kind="stable")
        res = _open_loop(prefill, decode, Workload(arrival[order], prompt[order],
                                                   output[order]), link, seed, **models)
        done = np.empty(n)
        done[order] = res.requests["completion_s"].to_numpy()
        arrival = np.concatenate([np.zeros(conc), done[:max(n - conc, 0)]])[:n]
        means = np.array([res.requests["ttft_s"].mean(), res.requests["tpot_s"].mean()])
        if last is not None and np.all(np.abs(means / last - 1.0) <= CLOSED_LOOP_TOLERANCE):
            break
        last = means
    return res


def _open_loop(prefill: ServeConfig, decode: ServeConfig, workload: Workload, link: Link,
               seed: int, prefill_step_model: StepTimeModel | None = None,
               decode_step_model: StepTimeModel | None = None) -> DisaggResult:
    """Requests arriving at their times through both pools and the link between them."""
    n = len(workload)
    first = Workload(workload.arrival_s, workload.prompt_tokens, np.ones(n, dtype=np.int64))
    pre = simulate(prefill, first, seed=seed, step_model=prefill_step_model)
    ready = pre.requests["completion_s"].to_numpy()
    prompt = workload.prompt_tokens
    per_token = kv_bytes_per_token(prefill.model_spec, prefill.precision, ParallelPlan())
    state = state_bytes_per_sequence(prefill.model_spec, prefill.precision, ParallelPlan())
    pairs = min(prefill.tp, decode.tp)
    seconds = link.latency_s + (prompt * per_token + state) / (pairs * link.bandwidth_bps
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
