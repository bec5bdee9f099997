"""Per-plan arrays of what one layer, the embedding and the head cost per micro-batch:
kernel seconds and the communication each runs inline (exposed), by kind.

Inline communication sits on the critical path of the layer that issues it:
  TP (Megatron, Shoeybi et al. 2019): two all-reduces per layer forward, two backward; with
  sequence parallelism each becomes a reduce-scatter plus an all-gather (same bytes);
  exposed unless the stack overlaps them with the layer's GEMMs (CommOverlap.tp_comm_overlap).
  EP (GShard/Switch; Megatron-Core MoE): all-to-all dispatch and combine, forward and
  backward, waiting on the most loaded rank (its share grows with `expert_skew`).
  CP ring attention (Liu et al. 2023; Megatron-Core CP): cp - 1 KV hops per layer, each
  overlapped with one block of attention; backward sends KV and its gradient. All-to-all CP
  (DeepSpeed-Ulysses): four all-to-alls per pass, exposed; the attention kernels are priced
  as the ring's (the same FLOPs per GPU).
  ZeRO-3 / FSDP (Rajbhandari et al. 2020; Zhao et al. 2023): each layer's parameters are
  all-gathered before its forward and backward, prefetched under the previous layer's
  compute, and its gradients reduce-scattered after its backward, within the shard group
  (all dp x cp ranks; under hybrid sharding, shard_group x cp consecutive ranks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfcast.comm import CollectiveModel
from perfcast.compose import group_collective
from perfcast.ops._training import lora_adapters
from perfcast.specs import Cluster, ModelSpec, Precision, bytes_per_element
from perfcast.train._layer import LayerCost, LayerKey

__all__ = ["INLINE_KINDS", "LAYER_PARTS", "Parts", "layer_parts", "params_per_gpu"]

INLINE_KINDS = ("tp", "sp", "cp", "ep_alltoall", "zero_allgather", "zero_reducescatter")
LAYER_PARTS = ("layer", "moe_layer", "embedding", "head")


@dataclass
class Parts:
    """exposed[(part, kind)] = (forward, backward) seconds per plan for one instance of the
    part per micro-batch, kind 'compute' or one of INLINE_KINDS (backward includes what
    recomputation re-runs); total[...] the same with overlapped communication in full."""

    exposed: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]
    total: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]
    recompute: dict[str, np.ndarray]  # per part: recomputation's kernel seconds in backward


def _moe_tp(key: LayerKey) -> int:
    return max(key.tp * key.ep_dp // key.ep, 1) if key.ep > 1 else key.tp


def params_per_gpu(model: ModelSpec, tp: np.ndarray, ep: np.ndarray, moe_tp: np.ndarray,
                   lora_rank: int | None) -> dict[str, np.ndarray]:
    """Parameters one GPU holds of one dense layer, one MoE layer (its dense part and its
    experts), the embedding and the head, and the trainable ones of each (LoRA: adapters)."""
    h, n = model.hidden_size, len(tp)
    dense_i = next((i for i in range(model.num_layers) if not model.is_moe_layer(i)), None)
    out = {"layer": np.zeros(n), "moe_dense": np.zeros(n), "moe_experts": np.zeros(n)}
    if dense_i is not None:
        out["layer"] = model.layer_params(dense_i) / tp
    if model.moe is not None:
        spec = model.moe
        experts = spec.num_experts * model.ffn_params(spec.expert_intermediate_size)
        moe_i = next(i for i in range(model.num_layers) if model.is_moe_layer(i))
        out["moe_dense"] = (model.layer_params(moe_i) - experts) / tp
        out["moe_experts"] = experts / (ep * moe_tp)
    out["embedding"] = model.vocab_size * h / tp + (model.embedding_params()
                                                    - model.vocab_size * h)
    out["head"] = model.vocab_size * h / tp  # tied: a copy on the last stage (Megatron)
    if lora_rank:
        per = {op: sum(lora_rank * (i + o) for i, o in pairs)
               for op, pairs in lora_adapters(model).items()}
        out["train_layer"] = sum(per.values()) / tp
        out["train_moe"] = (per["qkv_proj"] + per["o_proj"]) / tp + np.zeros(n)
        out["full_finetune"] = np.zeros(n)
    else:
        out["train_layer"], out["train_moe"] = out["layer"], out["moe_dense"]
        out["full_finetune"] = np.ones(n)
    return out


def _intra(keys: list[LayerKey], costs: list[LayerCost], model: ModelSpec, cluster: Cluster,
           comm: CollectiveModel, precision: Precision, a2a: np.ndarray) -> dict:
    """Seconds per unique layer key of the collectives inside each part, by kind, plus the
    CP ring's one hop and, for the keys `a2a` marks, all-to-all CP's one pass."""
    rows = [(u, part, phase, fam, size * (min(k.expert_skew, k.ep) if fam == "alltoall"
                                           else 1.0), group, k.cp if fam == "alltoall" else 1,
             "ep_alltoall" if fam == "alltoall" else ("sp" if k.sp else "tp"))
            for u, (k, c) in enumerate(zip(keys, costs, strict=True))
            for part, phase, fam, size, group in c.collectives]
    out: dict = {}
    for fam in {r[3] for r in rows}:
        sel = [r for r in rows if r[3] == fam]
        secs = group_collective(comm, cluster, fam, np.array([r[4] for r in sel]),
                                np.array([r[5] for r in sel]), np.array([r[6] for r in sel]))
        for r, t in zip(sel, secs, strict=True):
            arr = out.setdefault((r[1], r[2], r[7]), np.zeros(len(keys)))
            arr[r[0]] += t
    kv = np.array([k.micro_batch * k.seq_len / k.cp * 2 * max(model.num_kv_heads // k.tp, 1)
                   * model.head_dim * bytes_per_element(precision.vector_math) for k in keys])
    cp = np.array([k.cp for k in keys])
    crosses = np.array([k.tp * k.cp > cluster.gpus_per_node for k in keys])
    # a ring that spans nodes is as slow as its inter-node hop: price a hop between nodes
    out["cp_hop"] = group_collective(comm, cluster, "sendrecv", kv, np.where(cp > 1, 2, 1),
                                     np.where(crosses, cluster.gpus_per_node, 1))
    out["cp_a2a"] = _ulysses(keys, model, cluster, comm, precision, a2a)
    return out


def _ulysses(keys: list[LayerKey], model: ModelSpec, cluster: Cluster, comm: CollectiveModel,
             precision: Precision, a2a: np.ndarray) -> np.ndarray:
    """Seconds per unique key of one pass's all-to-alls under all-to-all context
    parallelism (DeepSpeed-Ulysses, Jacobs et al. 2023, arXiv:2309.14509): q, k and v go
    from sequence- to head-sharding before attention and the output back after it, each
    all-to-all over the cp ranks (tp apart) of that tensor's local slice. Keys no plan
    runs so are left at 0 (priced as groups of one)."""
    e = bytes_per_element(precision.vector_math)
    tokens = np.array([k.micro_batch * k.seq_len / k.cp for k in keys])
    tp = np.array([k.tp for k in keys])
    cp = np.where(a2a, [k.cp for k in keys], 1)
    q = tokens * np.maximum(model.num_heads // tp, 1) * model.head_dim * e
    kv = tokens * np.maximum(model.num_kv_heads // tp, 1) * model.head_dim * e
    return 2 * (group_collective(comm, cluster, "alltoall", q, cp, tp)
                + group_collective(comm, cluster, "alltoall", kv, cp, tp))


def _unique(keys: list[LayerKey]) -> tuple[list[LayerKey], np.ndarray, list[int]]:
    """Distinct keys, each key's position among them, and each distinct key's first index."""
    pos: dict[LayerKey, int] = {}
    first: list[int] = []
    idx = np.empty(len(keys), dtype=int)
    for i, k in enumerate(keys):
        if k not in pos:
            pos[k] = len(pos)
            first.append(i)
        idx[i] = pos[k]
    return list(pos), idx, first


def layer_parts(keys: list[LayerKey], costs: list[LayerCost], plans: dict[str, np.ndarray],
                model: ModelSpec, cluster: Cluster, comm: CollectiveModel,
                precision: Precision, state: dict[str, float],
                params: dict[str, np.ndarray]) -> Parts:
    """Parts of every plan (`plans`: per-plan arrays; `recompute` coded 0 none,
    1 selective, 2 full)."""
    uniq, idx, first = _unique(keys)
    ucost = [costs[i] for i in first]
    a2a = np.zeros(len(uniq), dtype=bool)
    a2a[idx[plans["cp_a2a"]]] = True  # the keys an all-to-all CP plan runs
    intra = _intra(uniq, ucost, model, cluster, comm, precision, a2a)
    rc, cp = plans["recompute"], plans["cp"]
    zero = np.zeros(len(keys))
    exposed, total, recompute = {}, {}, {}
    for part in LAYER_PARTS:
        comp = {ph: np.array([c.compute[part][ph] for c in ucost])[idx]
                for ph in ("forward", "backward")}
        attn = {ph: np.array([c.attention[part][ph] for c in ucost])[idx]
                for ph in ("forward", "backward")}
        inline = {(ph, kind): intra.get((part, ph, kind), np.zeros(len(uniq)))[idx]
                  for ph in ("forward", "backward") for kind in ("tp", "sp", "ep_alltoall")}
        layer = part in ("layer", "moe_layer")
        full, again = (rc == 2) & layer, (rc >= 1) & layer
        rec_c = np.where(full, comp["forward"], np.where(again, attn["forward"], 0.0))
        exposed[(part, "compute")] = (comp["forward"], comp["backward"] + rec_c)
        recompute[part] = rec_c  # kernels only: re-run collectives stay with their kind
        for kind in ("tp", "sp", "ep_alltoall"):
            f, b = inline[("forward", kind)], inline[("backward", kind)]
            exposed[(part, kind)] = (f, b + full * f)
            if kind != "ep_alltoall":
                total[(part, kind)] = exposed[(part, kind)]
                exposed[(part, kind)] = _tp_overlapped(exposed[(part, kind)], comp, attn,
                                                       plans["tp_overlap"])
        hop = intra["cp_hop"][idx] if layer else zero
        cp_f = (cp - 1) * np.maximum(hop - attn["forward"] / cp, 0.0)
        cp_b = (cp - 1) * np.maximum(2 * hop - attn["backward"] / cp, 0.0)
        uly = intra["cp_a2a"][idx] if layer else zero  # on the critical path: not hidden
        a2a = plans["cp_a2a"]
        exposed[(part, "cp")] = (np.where(a2a, uly, cp_f),
                                 np.where(a2a, uly + full * uly, cp_b + again * cp_f))
        total[(part, "cp")] = (np.where(a2a, uly, (cp - 1) * hop),
                               np.where(a2a, uly + full * uly,
                                        (cp - 1) * 2 * hop + again * (cp - 1) * hop))
        _zero3(part, exposed, total, plans, cluster, comm, state, params)
    for key, pair in exposed.items():
        total.setdefault(key, pair)
    return Parts(exposed=exposed, total=total, recompute=recompute)


def _tp_overlapped(pair: tuple[np.ndarray, np.ndarray], comp: dict, attn: dict,
                   on: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TP communication overlap (Megatron-Core --tp-comm-overlap, Transformer Engine
    userbuffers: each TP all-gather / reduce-scatter is split into chunks pipelined with the
    GEMM that consumes or produces it; Wang et al. 2023, "Overlap Communication with Dependent
    Computation via Decomposition", ASPLOS): only what outlasts the layer's non-attention
    kernels stays exposed, per pass."""
    out = []
    for comm_s, phase in zip(pair, ("forward", "backward"), strict=True):
        gemm_s = comp[phase] - attn[phase]
        out.append(np.where(on, np.maximum(comm_s - gemm_s, 0.0), comm_s))
    return out[0], out[1]


def _zero3(part: str, exposed: dict, total: dict, plans: dict[str, np.ndarray],
           cluster: Cluster, comm: CollectiveModel, state: dict[str, float],
           params: dict[str, np.ndarray]) -> None:
    """ZeRO-3/FSDP gathers and reduce-scatters of one layer, hidden under its neighbour's
    compute where they are shorter (forward: gather; backward: gather + reduce-scatter)."""
    n = len(plans["tp"])
    on = (plans["zero"] == 3) & (part in ("layer", "moe_layer"))
    if not on.any():
        for kind in ("zero_allgather", "zero_reducescatter"):
            exposed[(part, kind)] = (np.zeros(n), np.zeros(n))
        return
    if part == "layer":
        held, trained = params["layer"], params["train_layer"]
    else:
        held = params["moe_dense"] + params["moe_experts"]
        trained = params["train_moe"] + params["moe_experts"] * params["full_finetune"]
    group, stride = plans["shard_dp"] * plans["cp"], plans["tp"]
    ag = on * group_collective(comm, cluster, "allgather", held * state["gathered"], group,
                               stride)
    rs = on * group_collective(comm, cluster, "reducescatter", trained * state["gradients"],
                               group, stride)
    busy_f = sum(exposed[(part, k)][0] for k in ("compute", "tp", "sp", "cp", "ep_alltoall"))
    busy_b = sum(exposed[(part, k)][1] for k in ("compute", "tp", "sp", "cp", "ep_alltoall"))
    over_b = np.maximum(ag + rs - busy_b, 0.0)
    share = np.divide(ag, ag + rs, out=np.zeros(n), where=ag + rs > 0)
    exposed[(part, "zero_allgather")] = (np.maximum(ag - busy_f, 0.0), over_b * share)
    exposed[(part, "zero_reducescatter")] = (np.zeros(n), over_b * (1 - share))
    total[(part, "zero_allgather")] = (ag, ag)
    total[(part, "zero_reducescatter")] = (np.zeros(n), rs)
