"""The kernels eager PyTorch launches for a HuggingFace transformer, one row per kernel.

`step_ops` describes what a serving engine runs (fused attention, fused norms); this module
describes what `model(input_ids)` launches in plain PyTorch: every matmul, scale, mask,
softmax and each of GELU-tanh's eight elementwise kernels, named in the eager-kernel
vocabulary the measurements use (`linear`, `bmm`, `add`, `mulu`, `softmax`, `ln`, ...; the
part after ':' only labels the row). `fused=True` applies the fusion rules of
`_fusion.py` (what torch.compile-style fusion makes of the same graph), and `mode="training"`
adds the backward kernels autograd launches for each forward kernel.

`attention="eager"` is HF's legacy attention (the s x s scores materialised: bmm, scale,
mask, softmax, bmm; what NeuSight's PyTorch-1.x labels measured); `attention="sdpa"` is
transformers' default since 4.36: one `scaled_dot_product_attention` kernel per layer, priced
as the serving tables' `attn_prefill` / `attn_decode` row (`_transformer._attention`), GQA
through `enable_gqa` (transformers 5 `sdpa_attention_forward`: no repeat_kv without a mask).
`mode="decode"` is one `generate()` step: one new token per sequence over `context` cached
ones, HF's DynamicCache `torch.cat` of the new K/V onto the whole cache, last-token logits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from perfcast.errors import InputError
from perfcast.ops._batch import Batch
from perfcast.ops._eager_backward import backward_rows
from perfcast.ops._fusion import fuse_rows
from perfcast.ops._loss import loss_rows
from perfcast.ops._table import COLUMNS, OpRows
from perfcast.ops._transformer import _attention as _serving_attention
from perfcast.ops._transformer import _Ctx
from perfcast.specs import ModelSpec, ParallelPlan, Precision, bytes_per_element

__all__ = ["EAGER_ATTENTION", "EAGER_LOGITS", "EAGER_MODES", "OPTIMIZERS", "eager_ops"]

EAGER_MODES = ("forward", "training", "decode")
EAGER_ATTENTION = ("eager", "sdpa")
EAGER_LOGITS = ("all", "last")
# HF models without an SDPA path (`_supports_sdpa` unset in transformers 5): eager attention.
_NO_SDPA = ("gpt_neo", "switch_transformers")
# torch.optim step per parameter (fp32, foreach multi-tensor kernels): bytes read, written,
# FLOPs. Adam reads param, grad, exp_avg, exp_avg_sq and writes param and both moments;
# SGD with momentum reads param, grad, buffer and writes param and buffer.
OPTIMIZERS = {"adam": (16, 12, 12), "sgd": (12, 8, 3)}


@dataclass
class _Graph:
    """Accumulates eager kernels of one forward pass on one GPU (tensor-parallel shard)."""

    elem_bytes: float
    dtype: str
    training: bool
    rows: list[dict] = field(default_factory=list)
    layer: str = "embedding"
    count: int = 1
    precision: Precision = field(default_factory=Precision)
    plan: ParallelPlan = field(default_factory=ParallelPlan)
    sdpa: bool = False  # fused attention kernel instead of the materialised scores
    cache: bool = False  # HF DynamicCache: torch.cat of the new K/V onto the cache per layer
    autocast: bool = False  # fp32 parameters under torch.autocast to this 16-bit dtype

    @property
    def up(self) -> float:
        """Elements of this dtype per fp32 value: the residual stream's width under autocast
        (fp32 embeddings and norms, 16-bit linears), 1 without it."""
        return 4 / self.elem_bytes if self.autocast else 1.0

    def add(self, op: str, family: str, *, b: float = 1, m: float, n: float, k: float = 0,
            flops: float, reads: float, writes: float, fuse: str = "", **extra) -> None:
        self.rows.append({"layer": self.layer, "op": op, "family": family, "phase": "forward",
                          "b": b, "m": m, "n": n, "k": k, "flops": flops,
                          "bytes_read": reads * self.elem_bytes,
                          "bytes_written": writes * self.elem_bytes, "dtype": self.dtype,
                          "count": self.count, "fuse": fuse, **extra})

    def linear(self, label: str, tokens: float, out: float, inp: float,
               bias: bool = True, wide: bool = False) -> None:
        """nn.Linear / addmm: Y[tokens, out] = X[tokens, inp] W^T (+ b in the epilogue).
        Under autocast the fp32 weight is cast to 16 bits (once per forward; autocast caches
        leaf casts), and so is an input read off the fp32 stream (`wide`), at every call
        (PyTorch AMP docs, "CUDA Ops that can autocast to float16": linear)."""
        if self.autocast:
            self.vec("cast", "elementwise", f"{label}.weight_to_16", out, inp, reads=self.up)
            if wide:
                self.vec("cast", "elementwise", f"{label}.input_to_16", tokens, inp,
                         reads=self.up)
        self.add(f"linear:{label}", "gemm", m=tokens, n=out, k=inp,
                 flops=2 * tokens * out * inp, reads=tokens * inp + out * inp + bias * out,
                 writes=tokens * out, bias=bias)

    def bmm(self, label: str, batch: float, m: float, n: float, k: float) -> None:
        self.add(f"bmm:{label}", "gemm", b=batch, m=m, n=n, k=k, flops=2 * batch * m * n * k,
                 reads=batch * (m * k + k * n), writes=batch * m * n)

    def vec(self, kernel: str, family: str, label: str, rows: float, width: float,
            reads: float = 1, writes: float = 1, flops: float = 1, fuse: str = "") -> None:
        """An elementwise-style kernel over a [rows, width] tensor; `reads`/`writes` count
        full-size tensors (a broadcast operand is not one)."""
        e = rows * width
        self.add(f"{kernel}:{label}", family, m=rows, n=width, flops=flops * e,
                 reads=reads * e, writes=writes * e, fuse=fuse)

    def dropout(self, label: str, rows: float, width: float, fuse: str = "") -> None:
        """Active only in training (eval-mode dropout launches nothing)."""
        if self.training:
            self.vec("dropout", "elementwise", label, rows, width, writes=1.25, fuse=fuse)

    def norm(self, label: str, norm: str, rows: float, width: float, fuse: str = "",
             on_stream: bool = True) -> None:
        """HF's LayerNorm or RMSNorm kernels over [rows, width]; `on_stream`: the input is the
        residual stream (fp32 under autocast) rather than a 16-bit projection output."""
        wide = self.up if on_stream else 1.0
        if norm == "layernorm":  # layer_norm autocasts to fp32 (PyTorch AMP op list)
            self.vec("ln", "norm", label, rows, width, reads=wide, writes=wide, flops=5,
                     fuse=fuse)
            return
        # HF RMSNorm (Llama, T5): x.to(fp32), pow, mean, +eps, rsqrt, x*rstd, .to(dtype),
        # weight*x. The casts are no-ops in fp32; in half precision they launch two kernels
        # and the four in between move fp32 (`up` elements of this dtype per value): 8
        # kernels, as torch.profiler counts in a bf16 LlamaDecoderLayer on an H100
        # (docs/validation/gpu_check/h200_host_check.json, decoder_layer_kernels = 40)
        tag = fuse or f"rms_{label}"
        up = 4 / self.elem_bytes if self.elem_bytes < 4 else 1
        if self.autocast and on_stream:  # fp32 input: no casts, an fp32 weight multiply
            for kernel, part, cols, writes in (
                    ("powu", "pow", width, up), ("mean", "mean", width, up / width),
                    ("addu", "eps", 1, up), ("rsqrt", "rsqrt", 1, up),
                    ("mul", "scale", width, up), ("mul", "weight", width, up)):
                self.vec(kernel, "elementwise", f"{label}.{part}", rows, cols, reads=up,
                         writes=writes, fuse=tag)
            return
        if up > 1:
            self.vec("cast", "elementwise", f"{label}.to_fp32", rows, width, writes=up,
                     fuse=tag)
        self.vec("powu", "elementwise", f"{label}.pow", rows, width, reads=up, writes=up,
                 fuse=tag)
        self.vec("mean", "elementwise", f"{label}.mean", rows, width, reads=up,
                 writes=up / width, fuse=tag)
        self.vec("addu", "elementwise", f"{label}.eps", rows, 1, reads=up, writes=up,
                 fuse=tag)
        self.vec("rsqrt", "elementwise", f"{label}.rsqrt", rows, 1, reads=up, writes=up,
                 fuse=tag)
        self.vec("mul", "elementwise", f"{label}.scale", rows, width, reads=up, writes=up,
                 fuse=tag)
        if up > 1:
            self.vec("cast", "elementwise", f"{label}.to_dtype", rows, width, reads=up,
                     fuse=tag)
        self.vec("mul", "elementwise", f"{label}.weight", rows, width, fuse=tag)

    def activation(self, act: str, rows: float, width: float) -> None:
        if act in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
            # HF NewGELUActivation: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))), 8 kernels
            for i, (kernel, fam, reads) in enumerate((
                    ("mulu", "elementwise", 1), ("powu", "elementwise", 1),
                    ("mulu", "elementwise", 1), ("add", "elementwise", 2),
                    ("mulu", "elementwise", 1), ("tanh", "activation", 1),
                    ("addu", "elementwise", 1), ("mul", "elementwise", 2))):
                self.vec(kernel, fam, f"gelu_new.{i}", rows, width, reads=reads, fuse="act")
            return
        kernel = {"gelu": "gelu", "relu": "relu", "silu": "silu", "swish": "silu"}.get(act)
        if kernel is None:
            raise InputError("activation", f"no eager kernel for {act!r}",
                             ["gelu", "gelu_new", "relu", "silu"])
        self.vec(kernel, "activation", act, rows, width, flops=8, fuse="act")


_STYLES = {"gpt2": "gpt2", "gpt_neo": "gpt2", "bert": "bert", "roberta": "bert",
           "opt": "opt", "llama": "llama", "mistral": "llama", "qwen2": "llama",
           "qwen3": "llama", "mixtral": "llama", "switch_transformers": "t5", "t5": "t5",
           "vit": "vit"}


# transformers' attention modules that normalise q and k (RMSNorm) after the projections:
# per head (Qwen3Attention, Gemma3Attention: over head_dim) or over the whole projection
# (Olmo2Attention: q_norm over heads x head_dim)
_QK_NORM = {"qwen3": "head", "qwen3_moe": "head", "gemma3": "head", "gemma3_text": "head",
            "olmo2": "whole"}


def _style(model: ModelSpec) -> str:
    if model.model_type in _STYLES:
        return _STYLES[model.model_type]
    if model.kind == "encoder":
        return "bert"
    return "llama" if model.position == "rope" else "gpt2"


def _attention(g: _Graph, m: ModelSpec, style: str, batch: int, q_len: int, kv_len: int,
               heads: int, kv_heads: int, causal: bool, cross: bool = False,
               cached: int = 0) -> None:
    """Projections, the attention core over `kv_len` new plus `cached` keys (legacy scores
    chain or one SDPA kernel), the cache update and the output projection."""
    d, h, t = m.head_dim, m.hidden_size, batch * q_len
    bias = style != "t5" and (style != "llama" or m.attention_bias)
    if style == "gpt2":
        g.linear("c_attn", t, 3 * heads * d, h, wide=True)
    else:
        g.linear("q_proj", t, heads * d, h, bias, wide=True)
        kv_tokens = batch * kv_len
        g.linear("k_proj", kv_tokens, kv_heads * d, h, bias, wide=True)
        g.linear("v_proj", kv_tokens, kv_heads * d, h, bias, wide=True)
    if style == "opt":  # q * scaling, then .contiguous() of the transposed q, k, v
        g.vec("mulu", "elementwise", "q_scale", t, heads * d)
        for name in ("q", "k", "v"):  # transformers 5's OPT keeps the q scale only
            if not g.sdpa:
                g.vec("copy", "elementwise", f"{name}_contiguous", t, heads * d)
    if m.model_type in _QK_NORM:  # RMSNorm of q and k before RoPE, per head or whole
        per_head = _QK_NORM[m.model_type] == "head"
        for name, width in (("q", heads * d), ("k", kv_heads * d)):
            rows, cols = (t * width / d, d) if per_head else (t, width)
            g.norm(f"{name}_norm", "rmsnorm", rows, cols, on_stream=False)
    if style == "llama":
        for name, width in (("q", heads * d), ("k", kv_heads * d)):
            g.vec("mul", "elementwise", f"rope_{name}.cos", t, width, fuse=f"rope_{name}")
            # rotate_half: torch.cat((-x2, x1)), a negation of the half, then the copy
            g.vec("neg", "elementwise", f"rope_{name}.neg", t, width / 2, fuse=f"rope_{name}")
            g.vec("copy", "elementwise", f"rope_{name}.rotate", t, width, fuse=f"rope_{name}")
            g.vec("mul", "elementwise", f"rope_{name}.sin", t, width, fuse=f"rope_{name}")
            g.vec("add", "elementwise", f"rope_{name}.add", t, width, reads=2,
                  fuse=f"rope_{name}")
    keys = kv_len + cached
    if g.cache and not cross:
        _cache_update(g, batch * keys, kv_heads * d)
    if g.sdpa:
        _sdpa(g, m, style, batch, q_len, kv_len, cached, heads, causal, cross)
    else:
        _scores(g, style, batch, q_len, keys, heads, kv_heads, d, causal, cross)
        g.vec("copy", "elementwise", "context_contiguous", t, heads * d)
    g.linear("o_proj" if style != "gpt2" else "c_proj", t, h, heads * d, bias)


def _cache_update(g: _Graph, keys: float, width: float) -> None:
    """transformers 5 DynamicLayer.update: `torch.cat([cache, new])` for K and for V, so
    every step copies the whole cache (cache_utils.py)."""
    for name in ("k", "v"):
        g.vec("copy", "elementwise", f"cache_cat_{name}", keys, width)


def _sdpa(g: _Graph, m: ModelSpec, style: str, batch: int, q_len: int, kv_len: int,
          cached: int, heads: int, causal: bool, cross: bool) -> None:
    """One `scaled_dot_product_attention` kernel, as the serving tables build it (shape,
    causal pair count, bytes = Q, K, V read + O written); its output is already laid out
    [b, s, h, d], so transformers' `.transpose(1, 2).contiguous()` copies nothing."""
    if style == "t5":  # relative position bias -> an additive float mask (torch.where)
        g.vec("where", "elementwise", "position_bias_mask", batch * heads * q_len,
              kv_len + cached, reads=2)
    if cached:
        shape = Batch.decode(batch, kv_len + cached)
    else:
        shape = Batch(prefill_tokens=(q_len,) * batch,
                      encoder_tokens=kv_len if cross else 0)
    c = _Ctx(m, g.precision, g.plan, OpRows(), "forward")
    _serving_attention(c, g.layer, shape, g.count, causal=causal, cross=cross)
    for row in c.rows.rows:
        if row["family"] in ("attn_prefill", "attn_decode"):  # HF keeps its own cache
            g.rows.append({**row, "op": f"sdpa:{row['op']}", "fuse": ""})


def _scores(g: _Graph, style: str, batch: int, q_len: int, kv_len: int, heads: int,
            kv_heads: int, d: int, causal: bool, cross: bool) -> None:
    """HF's legacy eager attention: repeat_kv, scores, scale, mask, softmax, dropout,
    context."""
    if style == "llama" and kv_heads < heads:  # repeat_kv materialises K, V per query head
        for name in ("k", "v"):
            g.vec("copy", "elementwise", f"repeat_{name}", batch * kv_len, heads * d)
    bh, scores = batch * heads, batch * heads * q_len
    g.bmm("scores", bh, q_len, kv_len, d)
    if style in ("gpt2", "bert"):
        g.vec("divu", "elementwise", "scale", scores, kv_len, fuse="softmax")
    elif style in ("llama", "vit"):
        g.vec("mulu", "elementwise", "scale", scores, kv_len, fuse="softmax")
    if style == "gpt2":
        g.vec("where", "elementwise", "causal_mask", scores, kv_len, fuse="softmax")
    elif style == "opt" and causal:
        g.vec("add", "elementwise", "mask", scores, kv_len, fuse="softmax")
        g.vec("maxu", "elementwise", "clamp_min", scores, kv_len, fuse="softmax")
    elif style != "vit" and (style != "t5" or causal or not cross):  # padding / bias
        g.vec("add", "elementwise", "mask", scores, kv_len, fuse="softmax")
    g.vec("softmax", "softmax", "softmax", scores, kv_len, flops=5, fuse="softmax")
    g.dropout("attn_dropout", scores, kv_len, fuse="softmax")
    g.bmm("context", bh, q_len, d, kv_len)


def _mlp(g: _Graph, m: ModelSpec, style: str, tokens: float, inter: float) -> None:
    h, bias = m.hidden_size, style not in ("t5", "llama")
    if m.gated_mlp:
        g.linear("gate_proj", tokens, inter, h, bias, wide=True)
        g.linear("up_proj", tokens, inter, h, bias, wide=True)
        g.activation(m.activation, tokens, inter)
        g.vec("mul", "elementwise", "gate_mul", tokens, inter, reads=2, fuse="act")
    else:
        g.linear("fc1", tokens, inter, h, bias, wide=True)
        g.activation(m.activation, tokens, inter)
    g.linear("fc2", tokens, h, inter, bias)


def _moe(g: _Graph, m: ModelSpec, tokens: float, tp: int) -> None:
    """Switch-style top-k routing: router, then per expert a gather, its MLP and a scatter
    (HF loops over experts; uniform routing assumed)."""
    moe, h = m.moe, m.hidden_size
    g.linear("router", tokens, moe.num_experts, h, bias=False, wide=True)
    g.vec("softmax", "softmax", "router_softmax", tokens, moe.num_experts, flops=5)
    per_expert = tokens * moe.experts_per_token / moe.num_experts
    count = g.count
    g.count = count * moe.num_experts
    g.vec("copy", "elementwise", "expert_gather", per_expert, h)
    _mlp(g, m, "t5", per_expert, moe.expert_intermediate_size / tp)  # experts carry no bias
    g.vec("mul", "elementwise", "expert_scale", per_expert, h, reads=2)
    g.vec("copy", "elementwise", "expert_scatter", per_expert, h)
    g.count = count


def _allreduce(g: _Graph, label: str, tokens: float, width: float, tp: int) -> None:
    if tp > 1:
        g.add(f"allreduce:{label}", "allreduce", m=tokens * width * g.elem_bytes, n=tp,
              flops=0, reads=tokens * width, writes=0)


def _block(g: _Graph, m: ModelSpec, style: str, batch: int, seq: int, tp: int, *,
           causal: bool, moe: bool = False, cross_len: int = 0, cached: int = 0) -> None:
    """One transformer layer (pre-LN for GPT-2/OPT/Llama/T5, post-LN for BERT)."""
    t, h = batch * seq, m.hidden_size
    heads, kv_heads = m.num_heads // tp, max(m.num_kv_heads // tp, 1)
    pre = style != "bert"
    if pre:
        g.norm("ln_1", m.norm, t, h)
    _attention(g, m, style, batch, seq, seq, heads, kv_heads, causal, cached=cached)
    _allreduce(g, "attn", t, h, tp)
    g.dropout("resid_dropout", t, h)
    g.vec("add", "elementwise", "attn_residual", t, h, reads=1 + g.up, writes=g.up,
          fuse="" if pre else "add_ln")
    if not pre:
        g.norm("ln_attn", m.norm, t, h, fuse="add_ln")
    if cross_len:
        g.norm("ln_cross", m.norm, t, h)
        _attention(g, m, style, batch, seq, cross_len, heads, heads, causal=False, cross=True)
        _allreduce(g, "cross", t, h, tp)
        g.vec("add", "elementwise", "cross_residual", t, h, reads=1 + g.up, writes=g.up)
    if pre:
        g.norm("ln_2", m.norm, t, h)
    if moe:
        _moe(g, m, t, tp)
    else:
        _mlp(g, m, style, t, m.intermediate_size / tp)
    _allreduce(g, "mlp", t, h, tp)
    g.dropout("mlp_dropout", t, h)
    g.vec("add", "elementwise", "mlp_residual", t, h, reads=1 + g.up, writes=g.up,
          fuse="" if pre else "add_ln")
    if not pre:
        g.norm("ln_mlp", m.norm, t, h, fuse="add_ln")


def _patch_embeddings(g: _Graph, m: ModelSpec, batch: int) -> None:
    """HF ViTEmbeddings: the stride-p patch conv (a GEMM over the patches, Dosovitskiy et al.
    2021 eq. 1), torch.cat of the class token, + position embeddings."""
    image, h = m.image, m.hidden_size
    t = batch * image.tokens
    g.layer, g.count = "embedding", 1
    g.linear("patch_embed", batch * image.patches, h, image.patch_inputs, wide=True)
    g.vec("copy", "elementwise", "cat_cls_token", t, h)
    g.vec("add", "elementwise", "add_positions", t, h, reads=1)
    g.dropout("embed_dropout", t, h)


def _embeddings(g: _Graph, m: ModelSpec, style: str, batch: int, seq: int) -> None:
    t, h = batch * seq, m.hidden_size
    if style == "vit":
        _patch_embeddings(g, m, batch)
        return
    g.layer, g.count = "embedding", 1
    up = g.up  # autocast leaves embeddings (and so the stream) in fp32
    g.vec("embedding", "embedding", "tokens", t, h, reads=up, writes=up, flops=0)
    g.rows[-1]["table_rows"] = m.vocab_size
    if m.position == "learned":
        g.vec("embedding", "embedding", "positions", seq, h, reads=up, writes=up, flops=0)
        g.vec("add", "elementwise", "add_positions", t, h, reads=up, writes=up)
    if style == "bert":
        g.vec("embedding", "embedding", "token_types", t, h, reads=up, writes=up, flops=0)
        g.vec("add", "elementwise", "add_token_types", t, h, reads=2 * up, writes=up)
        g.norm("ln_embed", m.norm, t, h)
    g.dropout("embed_dropout", t, h)


def _stack(g: _Graph, m: ModelSpec, style: str, batch: int, seq: int, tp: int, prefix: str,
           layers: int, causal: bool, cross_len: int = 0, cached: int = 0) -> None:
    n_moe = 0
    if m.moe is not None:
        n_moe = sum(m.is_moe_layer(i) for i in range(layers))
    for name, count, moe in ((f"{prefix}layer", layers - n_moe, False),
                             (f"{prefix}moe_layer", n_moe, True)):
        if count:
            g.layer, g.count = name, count
            _block(g, m, style, batch, seq, tp, causal=causal, moe=moe, cross_len=cross_len,
                   cached=cached)


def _check(batch: int, seq_len: int, mode: str, model: ModelSpec, attention: str,
           context: int, logits: str) -> None:
    for name, value in (("batch", batch), ("seq_len", seq_len)):
        if value < 1:
            raise InputError(name, f"must be >= 1, got {value}", ">= 1")
    if mode not in EAGER_MODES:
        raise InputError("mode", f"unknown mode {mode!r}", list(EAGER_MODES))
    if attention not in EAGER_ATTENTION:
        raise InputError("attention", f"unknown attention {attention!r}", EAGER_ATTENTION)
    if logits not in EAGER_LOGITS:
        raise InputError("logits", f"unknown logits {logits!r}", EAGER_LOGITS)
    _check_decode(seq_len, mode, model, context)
    if model.image is not None and seq_len != model.image.tokens:
        raise InputError("seq_len", f"{model.name} sees {model.image.tokens} tokens per "
                         f"image (patches + class token), got {seq_len}",
                         str(model.image.tokens))
    limit = model.max_position_embeddings
    if limit and model.position == "learned" and seq_len + context > limit:
        raise InputError("seq_len", f"{seq_len + context} exceeds {model.name}'s {limit} "
                         "learned positions", f"<= {limit}")


def _check_decode(seq_len: int, mode: str, model: ModelSpec, context: int) -> None:
    """Decode is one new token per sequence over a cache of `context` >= 1 tokens, for
    decoder-only models; `context` means nothing in the other modes."""
    if mode != "decode":
        if context:
            raise InputError("context", f"only applies to mode='decode', got {context}",
                             "0 (omit it) or mode='decode'")
        return
    if context < 1:
        raise InputError("context", f"decode needs the cached tokens, got {context}", ">= 1")
    if seq_len != 1:
        raise InputError("seq_len", f"decode runs one new token per sequence, got {seq_len}",
                         "1")
    if model.kind != "decoder":
        raise InputError("mode", f"decode needs a decoder-only model, {model.name} is "
                         f"{model.kind}", ["forward", "training"])


def _optimizer_row(name: str, params: float, dtype: str) -> dict:
    read, written, flops = OPTIMIZERS[name]
    return {"layer": "optimizer", "op": f"{name}:step", "family": "elementwise",
            "phase": "optimizer", "b": 1, "m": params, "n": 1.0, "k": 0.0,
            "flops": flops * params, "bytes_read": read * params,
            "bytes_written": written * params, "dtype": dtype, "count": 1, "fuse": ""}


def eager_ops(model: ModelSpec, batch_size: int, seq_len: int, mode: str = "forward",
              precision: Precision | None = None, plan: ParallelPlan | None = None,
              fused: bool = False, recompute: bool = False,
              optimizer: str | None = None, *, attention: str = "eager", context: int = 0,
              logits: str = "all", autocast: bool = False) -> pd.DataFrame:
    """Kernels of `model(input_ids)` over [batch_size, seq_len] on one GPU of a TP group,
    logits for every position (the HF *ForCausalLM forward) or, `logits="last"`, for the
    last one (`generate()`'s `logits_to_keep=1`); encoder-decoder models run the encoder
    and the decoder over seq_len tokens each. `mode="training"` appends backward;
    `recompute` (full activation checkpointing per layer) re-runs each layer's forward
    before its backward; `optimizer` ('adam', 'sgd') adds the parameter update of this GPU's
    shard as its own phase. `mode="decode"`: one token per sequence (`seq_len` = 1) over
    `context` cached tokens. `attention`: 'eager' (legacy, materialised scores) or 'sdpa'
    (module docstring); models without an SDPA path in transformers keep 'eager'.
    `autocast`: fp32 parameters run under torch.autocast to `precision`'s 16-bit dtype (AMP,
    as HF Trainer's bf16=True): weights and the inputs of linears cast per forward, the
    residual stream, embeddings and norms in fp32."""
    _check(batch_size, seq_len, mode, model, attention, context, logits)
    model.require_uniform_layers("an eager (HF transformers) op table")
    precision = precision or Precision()
    plan = plan or ParallelPlan()
    plan.check(model)
    if autocast and bytes_per_element(precision.activations) >= 4:
        raise InputError("autocast", f"autocasts to a 16-bit dtype, got "
                         f"{precision.activations.value}", ["bf16", "fp16"])
    style, tp = _style(model), plan.tp
    sdpa = attention == "sdpa" and model.model_type not in _NO_SDPA
    g = _Graph(bytes_per_element(precision.activations), str(precision.gemm_math),
               training=mode == "training", precision=precision, plan=plan, sdpa=sdpa,
               autocast=autocast,
               cache=model.kind == "decoder" and (mode == "decode" or sdpa and
                                                  mode == "forward"))
    _embeddings(g, model, style, batch_size, seq_len)
    loss: list[dict] = []
    if model.kind == "encoder-decoder":
        _stack(g, model, style, batch_size, seq_len, tp, "encoder_",
               model.num_encoder_layers, causal=False)
        g.layer, g.count = "encoder_head", 1
        g.norm("ln_encoder", model.norm, batch_size * seq_len, model.hidden_size)
        _embeddings(g, model, style, batch_size, seq_len)
        g.layer = "decoder_embedding"
    _stack(g, model, style, batch_size, seq_len, tp, "", model.num_layers,
           causal=model.kind != "encoder",
           cross_len=seq_len if model.kind == "encoder-decoder" else 0, cached=context)
    t, h = batch_size * seq_len, model.hidden_size
    g.layer, g.count = "head", 1
    if style == "vit":  # ViTForImageClassification: final LN, classifier on the CLS token
        g.norm("layernorm", model.norm, t, h)
        g.linear("classifier", batch_size, model.vocab_size, h, wide=True)
    elif style == "bert":  # pooler + classifier (BertForSequenceClassification)
        g.linear("pooler", batch_size, h, h, wide=True)
        g.vec("tanh", "activation", "pooler_tanh", batch_size, h)
        g.linear("classifier", batch_size, 2, h)
    else:  # the final norm runs over every position, then hidden[:, -logits_to_keep:]
        g.norm("ln_f", model.norm, t, h)
        out = batch_size if logits == "last" else t
        g.linear("lm_head", out, model.vocab_size / tp, h, bias=False, wide=True)
        if g.training:  # labels=input_ids: the LM loss over every position's logits
            loss = loss_rows(out, model.vocab_size / tp, precision)
    rows = g.rows
    if recompute and not g.training:
        raise InputError("recompute", "only applies to mode='training'", ["training"])
    if optimizer is not None and (optimizer not in OPTIMIZERS or not g.training):
        raise InputError("optimizer", f"{optimizer!r} with mode={mode!r}",
                         f"{sorted(OPTIMIZERS)} with mode='training'")
    if g.training:
        again = [{**r, "phase": "recompute"} for r in rows if "layer" in r["layer"]
                 and r["family"] != "allreduce"] if recompute else []
        rows = rows + again + backward_rows(rows)
        rows[len(g.rows):len(g.rows)] = loss  # after the forward, before the backward
    if fused:
        rows = fuse_rows(rows)
    if optimizer is not None:
        rows = rows + [_optimizer_row(optimizer, model.total_params() / tp, g.dtype)]
    frame = pd.DataFrame(rows)
    return frame[COLUMNS].astype({"b": "int64", "count": "int64", "m": "float64",
                                  "n": "float64", "k": "float64"})
