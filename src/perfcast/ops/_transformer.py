"""A transformer step (prefill, decode, mixed) as an operator table, per GPU of a TP group."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from perfcast.ops._batch import Batch, attended_keys
from perfcast.ops._table import FUSED_QUANT, OpRows
from perfcast.specs import ModelSpec, ParallelPlan, Precision, bytes_per_element

__all__ = ["step_ops", "step_rows"]


@dataclass(frozen=True)
class _Ctx:
    """Everything the row builders share for one step on one GPU."""

    model: ModelSpec
    prec: Precision
    plan: ParallelPlan
    rows: OpRows
    phase: str

    @property
    def act_b(self) -> float:
        return bytes_per_element(self.prec.activations)

    @property
    def vec_b(self) -> float:
        """Bytes per element of tensors between kernels (see Precision.vector_math)."""
        return bytes_per_element(self.prec.vector_math)

    @property
    def attn_b(self) -> float:
        return bytes_per_element(self.prec.attention_math)

    @property
    def w_b(self) -> float:
        return bytes_per_element(self.prec.weights)

    @property
    def kv_b(self) -> float:
        return bytes_per_element(self.prec.kv_cache)

    @property
    def heads(self) -> int:
        return self.model.num_heads // self.plan.tp

    @property
    def kv_heads(self) -> int:
        """KV heads per GPU; replicated when tp exceeds them (Megatron/vLLM GQA rule)."""
        return max(self.model.num_kv_heads // self.plan.tp, 1)

    def gemm(self, layer: str, op: str, tokens: float, n: float, k: float, count: int,
             groups: float = 1, weight: bool = True) -> None:
        """Y[tokens, n] = X[tokens, k] W[k, n], `groups` of them (MoE experts)."""
        if tokens <= 0 or n <= 0:
            return
        flops = 2.0 * tokens * n * k
        w_bytes = groups * n * k * (self.w_b if weight else self.act_b)
        if weight and self.prec.fused_activation_quant:
            op = f"{op}:{FUSED_QUANT}"  # a configuration of the kernel, not another kernel
        self.rows.add(layer, op, "gemm", self.phase, b=max(int(round(groups)), 1),
                      m=tokens / groups, n=n, k=k, flops=flops,
                      bytes_read=tokens * k * self.act_b + w_bytes,
                      bytes_written=tokens * n * self.vec_b, dtype=self.prec.gemm_math,
                      count=count)

    def vector(self, layer: str, op: str, family: str, tokens: float, width: float,
               reads: float, writes: float, count: int, flops_per_elem: float = 1.0) -> None:
        """An elementwise-style kernel reading `reads` and writing `writes` tensors of the shape."""
        elems = tokens * width
        self.rows.add(layer, op, family, self.phase, m=tokens, n=width,
                      flops=flops_per_elem * elems, bytes_read=reads * elems * self.vec_b,
                      bytes_written=writes * elems * self.vec_b, dtype=self.prec.vector_math,
                      count=count)

    def collective(self, layer: str, op: str, family: str, message_bytes: float, group: int,
                   count: int) -> None:
        if group > 1 and message_bytes > 0:
            self.rows.add(layer, op, family, self.phase, m=message_bytes, n=group,
                          bytes_read=message_bytes, dtype=self.prec.vector_math, count=count)


def _attention(c: _Ctx, layer: str, batch: Batch, count: int, causal: bool = True,
               cross: bool = False, mixer: str = "full") -> None:
    """Prefill and decode attention rows (a sparse layer's indexer too), plus the KV-cache
    write. A query of a windowed layer attends at most `window_of(mixer)` keys."""
    m = c.model
    mla = m.mla
    window = None if cross else m.window_of(mixer)
    if mixer == "sparse":
        _indexer(c, layer, batch, count, causal)
    groups = []
    if batch.prefill_tokens:
        new = np.asarray(batch.prefill_tokens, dtype=float)
        ctx = np.full_like(new, batch.encoder_tokens) if cross else batch.context()
        keys = ctx if cross else new + ctx
        pairs = new * ctx if cross else attended_keys(new, ctx, window, causal)
        groups.append(("attn_prefill", new, keys, pairs))
    if batch.decode_context:
        ctx = np.asarray(batch.decode_context, dtype=float)
        if cross:
            ctx = np.full_like(ctx, batch.encoder_tokens)
        keys = np.minimum(ctx, window) if window else ctx
        groups.append(("attn_decode", np.ones_like(ctx), keys, keys))
    for family, new, keys, pairs in groups:
        absorbed = mla is not None and family == "attn_decode"
        if absorbed:  # DeepSeek-V2 weight absorption: attend in the latent space (MQA)
            d_qk, d_v = mla.kv_lora_rank + mla.qk_rope_head_dim, mla.kv_lora_rank
            kv_bytes_per_key = (mla.kv_lora_rank + mla.qk_rope_head_dim) * c.kv_b
        elif mla:
            d_qk, d_v = mla.qk_nope_head_dim + mla.qk_rope_head_dim, mla.v_head_dim
            kv_bytes_per_key = c.heads * (d_qk + d_v) * c.attn_b
        else:
            d_qk = d_v = m.head_dim
            kv_bytes_per_key = c.kv_heads * 2 * m.head_dim * c.kv_b
        seqs, q_tokens = len(new), float(new.sum())
        c.rows.add(
            layer, "cross_attn" if cross else "attn", family, c.phase, b=seqs * c.heads,
            m=q_tokens / seqs, n=float(keys.mean()), k=d_qk,
            flops=2.0 * c.heads * (d_qk + d_v) * float(pairs.sum()),
            bytes_read=q_tokens * c.heads * d_qk * c.attn_b + float(keys.sum()) * kv_bytes_per_key,
            bytes_written=q_tokens * c.heads * d_v * c.attn_b, dtype=c.prec.attention_math,
            count=count)
    if not cross and m.kind != "encoder":  # encoders keep no KV cache
        new_tokens = batch.num_tokens
        per_token = m.kv_cache_elements_per_token() if mla else c.kv_heads * 2 * m.head_dim
        c.rows.add(layer, "kv_write", "kv_write", c.phase, m=new_tokens, n=per_token,
                   bytes_read=new_tokens * per_token * c.vec_b,
                   bytes_written=new_tokens * per_token * c.kv_b, dtype=c.prec.kv_cache,
                   count=count)


def _indexer(c: _Ctx, layer: str, batch: Batch, count: int, causal: bool) -> None:
    """DSA's lightning indexer (DeepSeek-V3.2-Exp report, sec. 2.1): q from the q latent, one
    shared key per token, `indexer_heads` ReLU dot products with every cached key, then a
    top-k over the fp32 scores. Its scoring reads every key, so it is an attention row over
    the unclipped keys; the scores' write and the top-k's read are in its bytes."""
    m, s = c.model, c.model.sparse_attention
    t = batch.num_tokens
    q_in = m.mla.q_lora_rank if m.mla and m.mla.q_lora_rank else m.hidden_size
    c.gemm(layer, "indexer_q_proj", t, s.indexer_heads * s.indexer_head_dim, q_in, count)
    c.gemm(layer, "indexer_k_proj", t, s.indexer_head_dim + s.indexer_heads, m.hidden_size,
           count)
    groups = []
    if batch.prefill_tokens:
        new = np.asarray(batch.prefill_tokens, dtype=float)
        ctx = batch.context()
        groups.append(("attn_prefill", new, new + ctx, attended_keys(new, ctx, None, causal)))
    if batch.decode_context:
        ctx = np.asarray(batch.decode_context, dtype=float)
        groups.append(("attn_decode", np.ones_like(ctx), ctx, ctx))
    for family, new, keys, pairs in groups:
        seqs, q_tokens, n_pairs = len(new), float(new.sum()), float(pairs.sum())
        c.rows.add(layer, "indexer", family, c.phase, b=seqs * s.indexer_heads,
                   m=q_tokens / seqs, n=float(keys.mean()), k=s.indexer_head_dim,
                   flops=2.0 * s.indexer_heads * s.indexer_head_dim * n_pairs,
                   bytes_read=float(keys.sum()) * s.indexer_head_dim * c.kv_b + 4.0 * n_pairs,
                   bytes_written=4.0 * n_pairs, dtype=c.prec.attention_math, count=count)


def _recurrent_block(c: _Ctx, layer: str, batch: Batch, count: int) -> None:
    """A Gated DeltaNet / Mamba / lightning layer: projections, the short causal conv, the
    chunked scan over prefill tokens (chunkwise form, Yang et al. 2024: per token ~3 state
    products of vh x dk x dv plus the intra-chunk terms of a 64-token chunk) and one state
    step per decode sequence reading and writing its fp32 state. Heads split over TP."""
    m, lin, tp, t = c.model, c.model.linear_mixer, c.plan.tp, batch.num_tokens
    h = m.hidden_size
    c.vector(layer, "input_norm", "norm", t, h, reads=1, writes=1, count=count, flops_per_elem=4)
    c.gemm(layer, "in_proj", t, lin.in_width / tp, h, count)
    conv_width = (2 * lin.key_heads * lin.key_head_dim + lin.out_width) / tp
    if lin.conv_kernel:
        c.vector(layer, "conv1d", "elementwise", t, conv_width, reads=1, writes=1, count=count,
                 flops_per_elem=2 * lin.conv_kernel)
    state = lin.state_elements / tp
    if batch.prefill_tokens:
        pt = float(sum(batch.prefill_tokens))
        chunk = 64.0
        flops = pt * (6.0 * state + 2.0 * chunk * (lin.key_heads * lin.key_head_dim
                                                    + lin.out_width) / tp)
        c.rows.add(layer, "scan_prefill", "linear_attn", c.phase, m=pt, n=lin.out_width / tp,
                   k=lin.key_head_dim, flops=flops,
                   bytes_read=pt * lin.in_width / tp * c.act_b,
                   bytes_written=pt * lin.out_width / tp * c.vec_b,
                   dtype=c.prec.attention_math, count=count)
    if batch.decode_context:
        seqs = float(len(batch.decode_context))
        c.rows.add(layer, "state_decode", "linear_attn", c.phase, m=seqs, n=lin.out_width / tp,
                   k=lin.key_head_dim, flops=6.0 * seqs * state,
                   bytes_read=seqs * (4.0 * state + lin.in_width / tp * c.act_b),
                   bytes_written=seqs * (4.0 * state + lin.out_width / tp * c.vec_b),
                   dtype="fp32", count=count)
    c.vector(layer, "gated_norm", "norm", t, lin.out_width / tp, reads=2, writes=1,
             count=count, flops_per_elem=6)
    c.gemm(layer, "out_proj", t, h, lin.out_width / tp, count)
    c.collective(layer, "attn_allreduce", "allreduce", t * h * c.vec_b, tp, count)
    c.vector(layer, "attn_residual", "elementwise", t, h, reads=2, writes=1, count=count)


def _attention_block(c: _Ctx, layer: str, batch: Batch, count: int, causal: bool,
                     mixer: str = "full") -> None:
    m, tp, t = c.model, c.plan.tp, batch.num_tokens
    h = m.hidden_size
    c.vector(layer, "input_norm", "norm", t, h, reads=1, writes=1, count=count, flops_per_elem=4)
    if m.mla:
        mla = m.mla
        q_in = h
        if mla.q_lora_rank:
            c.gemm(layer, "q_a_proj", t, mla.q_lora_rank, h, count)
            q_in = mla.q_lora_rank
        c.gemm(layer, "q_b_proj" if mla.q_lora_rank else "q_proj", t, m.q_dim / tp, q_in, count)
        c.gemm(layer, "kv_a_proj", t, mla.kv_lora_rank + mla.qk_rope_head_dim, h, count)
        if batch.prefill_tokens:  # prefill expands the latent into per-head K and V
            pt = float(sum(batch.prefill_tokens))
            c.gemm(layer, "kv_b_proj", pt, c.heads * (mla.qk_nope_head_dim + mla.v_head_dim),
                   mla.kv_lora_rank, count)
        if batch.decode_context:  # decode absorbs W_UK into q and W_UV after attention
            dt = float(len(batch.decode_context))
            c.gemm(layer, "q_absorb", dt * c.heads, mla.kv_lora_rank, mla.qk_nope_head_dim,
                   count, groups=c.heads)
            c.gemm(layer, "v_absorb", dt * c.heads, mla.v_head_dim, mla.kv_lora_rank, count,
                   groups=c.heads)
    else:
        c.gemm(layer, "qkv_proj", t, c.heads * m.head_dim + 2 * c.kv_heads * m.head_dim, h,
               count)
    if m.position == "rope":
        width = c.heads * m.head_dim + c.kv_heads * m.head_dim
        c.vector(layer, "rope", "rope", t, width, reads=1, writes=1, count=count,
                 flops_per_elem=3)
    _attention(c, layer, batch, count, causal=causal, mixer=mixer)
    c.gemm(layer, "o_proj", t, h, m.attn_out_dim / tp, count)
    c.collective(layer, "attn_allreduce", "allreduce", t * h * c.vec_b, tp, count)
    c.vector(layer, "attn_residual", "elementwise", t, h, reads=2, writes=1, count=count)


def _ffn(c: _Ctx, layer: str, op: str, tokens: float, inter: float, count: int,
         groups: float = 1) -> None:
    m = c.model
    up = 2 * inter if m.gated_mlp else inter
    c.gemm(layer, f"{op}_up_proj", tokens, up, m.hidden_size, count, groups)
    c.vector(layer, f"{op}_act", "activation", tokens, inter, reads=2 if m.gated_mlp else 1,
             writes=1, count=count, flops_per_elem=8)
    c.gemm(layer, f"{op}_down_proj", tokens, m.hidden_size, inter, count, groups)


def _heaviest_rank_rows(plan: ParallelPlan, routed_mean: float, cap: float) -> float:
    """Routed rows of the most loaded EP rank, which every rank waits for in the combine:
    `expert_skew` x the mean (1 without EP: every GPU then holds every expert's slice),
    never more than every token on all of the rank's experts (`cap`)."""
    skew = plan.expert_skew if plan.ep > 1 else 1.0
    return min(routed_mean * skew, cap)


def _moe(c: _Ctx, layer: str, tokens: int, count: int) -> None:
    """Router, EP dispatch, grouped expert FFN on the most loaded EP rank, combine, shared
    experts. Tokens of the plan's dp ranks meet in the layer when ep > 1 (attention DP)."""
    m, moe, plan = c.model, c.model.moe, c.plan
    h, topk = m.hidden_size, moe.experts_per_token
    c.gemm(layer, "router", tokens, moe.num_experts, h, count)
    local_experts = moe.num_experts / plan.ep
    group_tokens = tokens * plan.moe_token_ranks  # symmetric ranks: each brings `tokens`
    rows = _heaviest_rank_rows(plan, group_tokens * topk / plan.ep,
                               group_tokens * min(topk, local_experts))
    # Expected experts hit by at least one routed token (uniform routing over experts).
    hit = 1.0 - (1.0 - topk / moe.num_experts) ** group_tokens
    active = max(local_experts * hit, 1.0)
    spread = plan.moe_token_ranks > 1  # tokens live on different ranks
    a2a, gather = spread and plan.ep > 1, spread and plan.ep == 1
    if a2a:  # each rank sends its tokens' top-k copies; (ep-1)/ep of it leaves the GPU
        c.collective(layer, "moe_dispatch", "alltoall", tokens * topk * h * c.act_b, plan.ep,
                     count)
    if gather:  # vLLM's DP without EP: all-gather the DP ranks' tokens, every rank a TP
        c.collective(layer, "moe_gather", "allgather", group_tokens * h * c.act_b,  # slice
                     plan.moe_token_ranks, count)
    _ffn(c, layer, "expert", rows, moe.expert_intermediate_size / plan.moe_tp, count,
         groups=active)
    if a2a:
        c.collective(layer, "moe_combine", "alltoall", tokens * topk * h * c.vec_b, plan.ep,
                     count)
    if gather:  # partial sums of every expert slice, each DP rank keeping its own tokens
        c.collective(layer, "moe_reduce_scatter", "reducescatter", group_tokens * h * c.vec_b,
                     plan.moe_tp, count)
    if moe.num_shared_experts:
        _ffn(c, layer, "shared", tokens, m.shared_expert_width() / plan.tp, count)


def layer_name(model: ModelSpec, mixer: str, ffn: str) -> str:
    """Op-table name of a layer kind: `layer` / `moe_layer` for the model's plain attention
    layers (as before layer patterns existed), prefixed by the mixer otherwise."""
    plain = mixer == "full" or (mixer == "sliding" and model.layer_mixers is None)
    prefix = "" if plain else "ffn_only_" if mixer == "none" else f"{mixer}_"
    return prefix + {"dense": "layer", "moe": "moe_layer", "none": "block"}[ffn]


def _decoder_layers(c: _Ctx, batch: Batch, causal: bool) -> None:
    m, t = c.model, batch.num_tokens
    for mixer, ffn, count in m.layer_groups():
        layer = layer_name(m, mixer, ffn)
        if mixer in ("linear", "mamba"):
            _recurrent_block(c, layer, batch, count)
        elif mixer != "none":
            _attention_block(c, layer, batch, count, causal, mixer)
        if m.kind == "encoder-decoder":
            _cross_attention(c, layer, batch, count)
        if ffn == "none":
            continue
        c.vector(layer, "post_attn_norm", "norm", t, m.hidden_size, reads=1, writes=1,
                 count=count, flops_per_elem=4)
        moe = ffn == "moe"
        if moe:
            _moe(c, layer, t, count)
        else:
            _ffn(c, layer, "mlp", t, m.intermediate_size / c.plan.tp, count)
        if not (moe and c.plan.moe_token_ranks > 1):  # else the combine sums the experts
            c.collective(layer, "mlp_allreduce", "allreduce", t * m.hidden_size * c.vec_b,
                         c.plan.tp, count)
        c.vector(layer, "mlp_residual", "elementwise", t, m.hidden_size, reads=2, writes=1,
                 count=count)


def _cross_attention(c: _Ctx, layer: str, batch: Batch, count: int) -> None:
    m, t = c.model, batch.num_tokens
    c.gemm(layer, "cross_q_proj", t, c.heads * m.head_dim, m.hidden_size, count)
    _attention(c, layer, batch, count, cross=True)
    c.gemm(layer, "cross_o_proj", t, m.hidden_size, c.heads * m.head_dim, count)
    c.collective(layer, "cross_allreduce", "allreduce", t * m.hidden_size * c.vec_b, c.plan.tp,
                 count)


def _encoder(c: _Ctx, batch: Batch) -> None:
    """The encoder stack of an encoder-decoder model, over the prompt (prefill only)."""
    m = c.model
    enc = Batch(prefill_tokens=batch.prefill_tokens)
    plain = m.model_copy(update={"kind": "encoder", "num_layers": m.num_encoder_layers,
                                 "layer_mixers": None, "layer_ffns": None})
    start = len(c.rows.rows)
    _decoder_layers(_Ctx(plain, c.prec, c.plan, c.rows, c.phase), enc, causal=False)
    for row in c.rows.rows[start:]:
        row["layer"] = "encoder_" + row["layer"]
    t = float(sum(batch.prefill_tokens))
    c.gemm("decoder_cross_kv", "cross_kv_proj", t, 2 * c.heads * m.head_dim, m.hidden_size,
           m.num_layers)


def step_ops(model: ModelSpec, batch: Batch, precision: Precision | None = None,
             plan: ParallelPlan | None = None, phase: str | None = None,
             all_logits: bool = False) -> pd.DataFrame:
    """The operator table of one forward step of `batch` on one GPU of the TP group.

    Logits are computed for the last token of each sequence (serving engines do this) unless
    `all_logits` (training, scoring).
    """
    return step_rows(model, batch, precision, plan, phase, all_logits).frame()


def step_rows(model: ModelSpec, batch: Batch, precision: Precision | None = None,
              plan: ParallelPlan | None = None, phase: str | None = None,
              all_logits: bool = False) -> OpRows:
    """`step_ops`'s rows before they become a table: a caller that joins the rows of many
    steps into one table (the serving model's per-point MoE grid) builds one frame, not one
    per step."""
    precision = precision or Precision()
    plan = plan or ParallelPlan()
    plan.check(model)
    if phase is None:
        phase = "mixed" if batch.prefill_tokens and batch.decode_context else (
            "prefill" if batch.prefill_tokens else "decode")
    c = _Ctx(model, precision, plan, OpRows(), phase)
    h, t = model.hidden_size, batch.num_tokens
    c.vector("embedding", "embed", "embedding", t, h, reads=1, writes=1, count=1, flops_per_elem=0)
    c.collective("embedding", "embed_allreduce", "allreduce", t * h * c.vec_b, plan.tp, 1)
    if model.kind == "encoder-decoder" and batch.prefill_tokens:
        _encoder(c, batch)
        batch = Batch(decode_context=(1,) * batch.num_seqs, encoder_tokens=max(
            batch.prefill_tokens))
    _decoder_layers(c, batch, causal=model.kind != "encoder")
    c.vector("head", "final_norm", "norm", t, h, reads=1, writes=1, count=1, flops_per_elem=4)
    out = t if all_logits or model.kind == "encoder" else batch.num_seqs
    c.gemm("head", "lm_head", out, model.vocab_size / plan.tp, h, 1)
    c.rows.add("head", "sampling", "sampling", phase, m=out, n=model.vocab_size / plan.tp,
               flops=5.0 * out * model.vocab_size / plan.tp,
               bytes_read=4.0 * out * model.vocab_size / plan.tp, bytes_written=8.0 * out,
               dtype="fp32", count=1)
    return c.rows
