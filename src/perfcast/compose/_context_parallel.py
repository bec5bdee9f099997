"""Context parallelism (CP) for one long request: the prompt's tokens split over cp GPUs.

Prefill (ring attention, Liu et al. 2023; Megatron-Core / TransformerEngine CP): the prompt
is cut into 2 x cp chunks and rank r holds chunks r and 2cp-1-r (the zig-zag split), so every
rank runs prompt / cp tokens through the linear layers and 1/cp of the causal query-key pairs.
Each layer passes KV blocks around the ring: cp - 1 hops, each a send/recv of one rank's KV
shard, overlapped with the attention of the block already held, so a hop is exposed only by
what it outlasts 1/cp of the layer's attention (the training model's rule, train/_parts.py).

Decode (KV kept sharded, as vLLM's decode context parallelism and Helix do): every rank runs
the step's linear layers on the new token (weights replicated), attends over its 1/cp of the
context, and the partial outputs with their log-sum-exp are all-gathered over the CP group
and merged (Milakov & Gimelshein 2018 online softmax): one all-gather per layer, exposed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from perfcast.comm import CollectiveModel
from perfcast.compose._step import StepForecast, model_tier
from perfcast.errors import InputError
from perfcast.kernels import ExecutionTimeModel, step_interval
from perfcast.ops import Batch, kv_bytes_per_token
from perfcast.specs import Cluster, ModelSpec, ParallelPlan, Precision, bytes_per_element

__all__ = ["ContextParallelCost", "check_cp", "cp_decode_context", "cp_prefill_batch",
           "cp_tokens_per_rank", "decode_combine", "extend_step", "kv_hop_bytes",
           "ring_prefill"]


@dataclass(frozen=True)
class ContextParallelCost:
    """What context parallelism adds to one request, per GPU of the CP group."""

    cp: int
    tokens_per_rank: int  # prompt tokens each rank prefills (the prompt padded to 2 x cp chunks)
    kv_hop_bytes: float  # one layer's KV block a rank sends per ring hop
    kv_ring_bytes: float  # all KV a rank sends during prefill: (cp - 1) x layers x hop
    ring_s: float  # send/recv time of those hops (overlapped with attention where it can be)
    ring_exposed_s: float  # the part not hidden behind attention: added to TTFT
    decode_combine_s: float  # all-gather of partial attention per decode step (all layers)

    def as_dict(self) -> dict[str, float | int]:
        return {"cp": self.cp, "tokens_per_rank": self.tokens_per_rank,
                "kv_hop_bytes": self.kv_hop_bytes, "kv_ring_bytes": self.kv_ring_bytes,
                "ring_comm_s": self.ring_s, "ring_exposed_s": self.ring_exposed_s,
                "decode_combine_s": self.decode_combine_s}


def check_cp(model: ModelSpec, plan: ParallelPlan, cluster: Cluster) -> None:
    """Refuse what this CP model cannot price: non-decoder models, pipeline stages, and
    groups larger than the cluster."""
    if plan.cp == 1:
        return
    if plan.cp_algorithm != "ring":
        raise InputError("cp_algorithm", f"{plan.cp_algorithm} context parallelism is priced "
                         "for training; one request's prefill is priced as ring attention",
                         "ring")
    if model.kind != "decoder":
        raise InputError("cp", f"context parallelism is priced for decoder-only models; "
                         f"{model.name} is {model.kind}", "1")
    if model.mixed_attention:
        raise InputError("cp", f"context parallelism is priced for models whose layers all "
                         f"attend every key; {model.name} has layer kinds "
                         f"{sorted({m for m, _, _ in model.layer_groups()})}", "1")
    if plan.pp > 1 or plan.dp > 1:
        raise InputError("cp", "context parallelism for one request runs with tp only "
                         f"(got pp={plan.pp}, dp={plan.dp})", "pp = dp = 1")
    if plan.tp * plan.cp > cluster.num_gpus:
        raise InputError("cp", f"tp x cp = {plan.tp * plan.cp} GPUs but {cluster.name} has "
                         f"{cluster.num_gpus}", f"<= {cluster.num_gpus // plan.tp}")


def cp_tokens_per_rank(prompt_tokens: int, cp: int) -> int:
    """Prompt tokens per rank: the prompt padded to a multiple of 2 x cp, split cp ways."""
    return math.ceil(prompt_tokens / (2 * cp)) * 2


def cp_prefill_batch(batch: int, prompt_tokens: int, cp: int) -> Batch:
    """One rank's prefill: two mirrored chunks of the padded prompt. Their causal query-key
    pairs equal those of one chunk of padded / cp tokens after padded (cp - 1) / (2 cp) cached
    ones: padded (padded + 1) / (2 cp), 1/cp of the whole prompt's."""
    chunk = cp_tokens_per_rank(prompt_tokens, cp)
    return Batch(prefill_tokens=(chunk,) * batch,
                 prefill_context=(chunk * (cp - 1) // 2,) * batch)


def cp_decode_context(context_tokens: int, cp: int) -> int:
    """Keys one rank attends in a decode step: its shard of the context."""
    return math.ceil(context_tokens / cp)


def kv_hop_bytes(model: ModelSpec, precision: Precision, plan: ParallelPlan, batch: int,
                 tokens_per_rank: int) -> float:
    """One layer's KV of one rank's tokens (its TP slice) in the KV-cache dtype: what one ring
    hop carries (a rank sends the K and V it stores)."""
    per_layer = kv_bytes_per_token(model, precision, ParallelPlan(tp=plan.tp)) / model.num_layers
    return batch * tokens_per_rank * per_layer


def _cp_link_view(cluster: Cluster, plan: ParallelPlan) -> Cluster:
    """The cluster as a CP group (cp GPUs, tp apart) sees it: when the group spans nodes, a
    view with one GPU per node, so the ring hop and the all-gather are priced on the network
    (a ring is as slow as its slowest hop)."""
    if plan.tp * plan.cp <= cluster.gpus_per_node or cluster.inter_node is None:
        return cluster
    return cluster.model_copy(update={"gpus_per_node": 1, "num_nodes": plan.cp})


def extend_step(step: StepForecast, rows: pd.DataFrame, seconds: np.ndarray,
                time_model: ExecutionTimeModel, cluster: Cluster) -> StepForecast:
    """`step` plus communication rows priced outside it (`seconds` per instance, on the
    critical path): time, comm time, op table and interval grow by their totals."""
    rows = rows.assign(time_s=seconds, total_s=seconds * rows["count"].to_numpy(dtype=float))
    ops = pd.concat([step.ops, rows], ignore_index=True)
    added = float(rows["total_s"].sum())
    tier = model_tier(time_model, cluster.device)
    interval = (step_interval(ops, tier, fixed_s=step.launch_s + step.host_s,
                              device=cluster.device) if tier else None)
    return StepForecast(time_s=step.time_s + added, kernel_s=step.kernel_s,
                        comm_s=step.comm_s + added, launch_s=step.launch_s,
                        host_s=step.host_s, ops=ops, interval_s=interval)


def _comm_row(op: str, family: str, phase: str, message: float, group: int, layers: int,
              dtype: str) -> pd.DataFrame:
    return pd.DataFrame([{"layer": "layer", "op": op, "family": family, "phase": phase,
                          "b": 1, "m": message, "n": float(group), "k": 0.0, "flops": 0.0,
                          "bytes_read": message, "bytes_written": 0.0, "dtype": dtype,
                          "count": layers}])


def ring_prefill(step: StepForecast, model: ModelSpec, precision: Precision,
                 plan: ParallelPlan, cluster: Cluster, comm: CollectiveModel, batch: int,
                 tokens_per_rank: int, time_model: ExecutionTimeModel
                 ) -> tuple[StepForecast, dict]:
    """A CP rank's prefill step with the ring's exposed KV hops added, and the ring's totals.

    Per layer: exposed = (cp - 1) x max(hop - attention / cp, 0) (module docstring)."""
    cp = plan.cp
    hop_bytes = kv_hop_bytes(model, precision, plan, batch, tokens_per_rank)
    view = _cp_link_view(cluster, plan)
    hop_s = float(comm.collective_times(np.array(["sendrecv"], dtype=object),
                                        np.array([hop_bytes]), np.array([2]), view)[0])
    attn = step.ops[step.ops["family"] == "attn_prefill"]
    counts = attn["count"].to_numpy(dtype=float)
    per_layer = (cp - 1) * np.maximum(hop_s - attn["time_s"].to_numpy() / cp, 0.0)
    exposed, layers = float(np.sum(per_layer * counts)), int(counts.sum())
    row = _comm_row("cp_kv_ring_exposed", "sendrecv", "prefill", hop_bytes, cp, layers,
                    str(precision.kv_cache))
    out = extend_step(step, row, np.array([exposed / max(layers, 1)]), time_model, cluster)
    return out, {"kv_hop_bytes": hop_bytes, "kv_ring_bytes": (cp - 1) * layers * hop_bytes,
                 "ring_s": (cp - 1) * layers * hop_s, "ring_exposed_s": exposed}


def decode_combine(step: StepForecast, model: ModelSpec, precision: Precision,
                   plan: ParallelPlan, cluster: Cluster, comm: CollectiveModel, batch: int,
                   time_model: ExecutionTimeModel) -> StepForecast:
    """A CP rank's decode step plus the per-layer all-gather of partial attention outputs
    (heads x head_dim in the vector dtype) and their fp32 log-sum-exp, from every rank."""
    heads = model.num_heads // plan.tp
    d_v = model.mla.v_head_dim if model.mla else model.head_dim
    per_rank = batch * heads * (d_v * bytes_per_element(precision.vector_math) + 4.0)
    message = per_rank * plan.cp  # the gathered buffer (CollectiveModel convention)
    seconds = comm.collective_times(np.array(["allgather"], dtype=object), np.array([message]),
                                    np.array([plan.cp]), _cp_link_view(cluster, plan))
    row = _comm_row("cp_attn_combine", "allgather", "decode", message, plan.cp,
                    model.num_layers, str(precision.vector_math))
    return extend_step(step, row, np.asarray(seconds, dtype=float), time_model, cluster)
