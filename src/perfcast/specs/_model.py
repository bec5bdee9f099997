"""A transformer's architecture, read from a HuggingFace config.json."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from perfcast.errors import InputError
from perfcast.specs._vision import VisionSpec

__all__ = ["FFN_KINDS", "MIXERS", "ImageSpec", "LinearMixerSpec", "ModelSpec", "MoESpec",
           "MLASpec", "SparseAttentionSpec"]

# Token mixer of one decoder layer: softmax attention over every key ("full"), over the last
# `sliding_window` keys ("sliding"), within fixed chunks ("chunked", Llama 4), over the top-k
# keys an indexer picks ("sparse", DeepSeek-V3.2 DSA), a fixed-size recurrent state
# ("linear": Gated DeltaNet, lightning attention; "mamba": Mamba2), or none (Nemotron-H's
# MLP-only blocks).
MIXERS = ("full", "sliding", "chunked", "sparse", "linear", "mamba", "none")
Mixer = Literal["full", "sliding", "chunked", "sparse", "linear", "mamba", "none"]
FFN_KINDS = ("dense", "moe", "none")
Ffn = Literal["dense", "moe", "none"]
WINDOWED = frozenset({"sliding", "chunked"})  # layers that cache at most `window` keys
RECURRENT = frozenset({"linear", "mamba"})

# Sanity bounds, far above any released model (126 layers, hidden 16384, vocab 256k): a
# config past them is a typo or a unit slip, refused (bound in the message) instead of
# forecast for minutes with per-layer loops.
MAX_LAYERS = 10_000
MAX_WIDTH = 2**20  # hidden, head and low-rank dims
MAX_FFN = 2**22  # intermediate sizes
MAX_HEADS = 2**16  # attention heads, experts
MAX_VOCAB = 2**24


class MoESpec(BaseModel):
    """Mixture-of-experts FFN: routed experts, top-k, shared experts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    num_experts: int = Field(gt=0, le=MAX_HEADS)
    experts_per_token: int = Field(gt=0)
    expert_intermediate_size: int = Field(gt=0, le=MAX_FFN)
    num_shared_experts: int = Field(default=0, ge=0, le=MAX_HEADS)
    first_dense_layers: int = Field(default=0, ge=0, le=MAX_LAYERS,
                                    description="leading layers with a dense FFN")
    layer_freq: int = Field(default=1, gt=0, le=MAX_LAYERS,
                            description="every n-th layer after those is MoE")
    layers: tuple[int, ...] | None = Field(default=None, description="the MoE layers' "
                                           "indices, when the config names them another way "
                                           "than first_dense_layers / layer_freq")
    shared_expert_intermediate_size: int | None = Field(
        default=None, gt=0, le=MAX_FFN, description="width of the shared experts' FFN "
        "(Qwen2-MoE); default num_shared_experts x expert_intermediate_size")

    def covers(self, layer: int) -> bool:
        """Whether decoder layer `layer` (0-based) is an MoE layer: the explicit `layers`,
        else the HF DeepSeek rule (first_dense_layers dense, then every layer_freq-th)."""
        if self.layers is not None:
            return layer in self.layers
        return layer >= self.first_dense_layers and layer % self.layer_freq == 0

    @model_validator(mode="after")
    def _topk_le_experts(self) -> MoESpec:
        if self.experts_per_token > self.num_experts:
            raise ValueError("experts_per_token must be <= num_experts")
        return self


class MLASpec(BaseModel):
    """Multi-head latent attention (DeepSeek-V2/V3): low-rank Q and compressed KV."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    q_lora_rank: int | None = Field(default=None, gt=0, le=MAX_WIDTH)
    kv_lora_rank: int = Field(gt=0, le=MAX_WIDTH)
    qk_nope_head_dim: int = Field(gt=0, le=MAX_WIDTH)
    qk_rope_head_dim: int = Field(gt=0, le=MAX_WIDTH)
    v_head_dim: int = Field(gt=0, le=MAX_WIDTH)


class LinearMixerSpec(BaseModel):
    """A recurrent token mixer with a fixed-size state per sequence: Gated DeltaNet (Qwen3-Next,
    Qwen3.5; Yang et al. 2025), lightning attention (MiniMax-M1) or Mamba2 (Dao & Gu 2024,
    mapped as value heads = SSM heads, value_head_dim = SSM head dim, key heads = groups,
    key_head_dim = d_state). State per sequence: value_heads x key_head_dim x value_head_dim."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["gated-deltanet", "kda", "lightning", "mamba1", "mamba2"]
    key_heads: int = Field(gt=0, le=MAX_HEADS)
    key_head_dim: int = Field(gt=0, le=MAX_WIDTH)
    value_heads: int = Field(gt=0, le=MAX_HEADS)
    value_head_dim: int = Field(gt=0, le=MAX_WIDTH)
    conv_kernel: int = Field(default=0, ge=0, le=64, description="short causal conv width "
                             "(0: none)")

    @property
    def state_elements(self) -> int:
        """Recurrent-state elements one sequence holds per layer."""
        return self.value_heads * self.key_head_dim * self.value_head_dim

    @property
    def in_width(self) -> int:
        """Output width of the input projection: q, k (key heads) and v, gate (value heads)."""
        return 2 * self.key_heads * self.key_head_dim + 2 * self.value_heads * self.value_head_dim

    @property
    def out_width(self) -> int:
        return self.value_heads * self.value_head_dim


class SparseAttentionSpec(BaseModel):
    """DeepSeek Sparse Attention (DeepSeek-V3.2-Exp, GLM-5): a lightning indexer scores every
    cached key with a few small heads; attention then reads only the top_k keys per query."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    top_k: int = Field(gt=0, le=MAX_FFN)
    indexer_heads: int = Field(gt=0, le=MAX_HEADS)
    indexer_head_dim: int = Field(gt=0, le=MAX_WIDTH)


class ImageSpec(BaseModel):
    """A ViT's input: square images cut into non-overlapping patches, one token each plus
    the class token (Dosovitskiy et al. 2021, eq. 1)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    image_size: int = Field(gt=0, le=MAX_WIDTH, description="pixels per side")
    patch_size: int = Field(gt=0, le=MAX_WIDTH, description="pixels per patch side")
    num_channels: int = Field(default=3, gt=0, le=MAX_HEADS)

    @property
    def patches(self) -> int:
        """Patch tokens per image: (image_size / patch_size)^2."""
        return (self.image_size // self.patch_size) ** 2

    @property
    def tokens(self) -> int:
        """Tokens through the encoder per image: the patches plus the class token."""
        return self.patches + 1

    @property
    def patch_inputs(self) -> int:
        """Inputs of the patch embedding (a stride-p conv as a GEMM): channels x p x p."""
        return self.num_channels * self.patch_size**2


class ModelSpec(BaseModel):
    """Shapes that determine a transformer's FLOPs, bytes and memory."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: Literal["decoder", "encoder", "encoder-decoder"] = "decoder"
    model_type: str = Field(default="", description="HF config model_type: which eager "
                            "implementation (kernel sequence) the architecture runs")
    hidden_size: int = Field(gt=0, le=MAX_WIDTH)
    num_layers: int = Field(gt=0, le=MAX_LAYERS,
                            description="decoder layers (encoder layers for encoders)")
    num_encoder_layers: int = Field(default=0, ge=0, le=MAX_LAYERS,
                                    description="encoder-decoder models only")
    num_heads: int = Field(gt=0, le=MAX_HEADS)
    num_kv_heads: int = Field(gt=0, le=MAX_HEADS)
    head_dim: int = Field(gt=0, le=MAX_WIDTH)
    intermediate_size: int = Field(gt=0, le=MAX_FFN)
    vocab_size: int = Field(gt=0, le=MAX_VOCAB)
    max_position_embeddings: int | None = Field(default=None, gt=0)
    gated_mlp: bool = False
    activation: str = "gelu"
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    position: Literal["rope", "learned", "relative"] = "learned"
    tied_embeddings: bool = False
    sliding_window: int | None = Field(default=None, gt=0)
    attention_bias: bool = False
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    vision: VisionSpec | None = Field(default=None, description="multimodal models' vision "
                                      "tower and projector (not counted in total_params)")
    image: ImageSpec | None = Field(default=None, description="image classifiers (ViT): the "
                                    "patch embedding replaces the token embedding and "
                                    "vocab_size holds the classifier's classes")
    layer_mixers: tuple[Mixer, ...] | None = Field(
        default=None, description="token mixer per decoder layer; None: every layer 'full' "
        "('sliding' when sliding_window is set)")
    layer_ffns: tuple[Ffn, ...] | None = Field(
        default=None, description="FFN per decoder layer; None: the MoE rule of `moe`")
    linear_mixer: LinearMixerSpec | None = None
    sparse_attention: SparseAttentionSpec | None = None
    attention_chunk: int | None = Field(default=None, gt=0, description="chunk of 'chunked' "
                                        "layers (Llama 4 local attention)")
    attention_sinks: bool = Field(default=False, description="learned per-head sink logits "
                                  "(gpt-oss): no cost of their own, but not every kernel "
                                  "supports them")
    inferred: tuple[str, ...] = Field(default=(), description="features read by inference "
                                      "rather than from a named config key")

    @model_validator(mode="after")
    def _heads_group(self) -> ModelSpec:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads "
                f"({self.num_kv_heads})"
            )
        for name, per_layer in (("layer_mixers", self.layer_mixers),
                                ("layer_ffns", self.layer_ffns)):
            if per_layer is not None and len(per_layer) != self.num_layers:
                raise ValueError(f"{name} has {len(per_layer)} entries for "
                                 f"{self.num_layers} layers")
        mixers = set(self.mixers())
        needs = (("linear_mixer", bool(mixers & RECURRENT), self.linear_mixer),
                 ("sparse_attention", "sparse" in mixers, self.sparse_attention),
                 ("sliding_window", "sliding" in mixers, self.sliding_window),
                 ("attention_chunk", "chunked" in mixers, self.attention_chunk))
        for name, used, value in needs:
            if used and value is None:
                raise ValueError(f"{name} is needed by the layer pattern")
        if self.layer_ffns is not None and "moe" in self.layer_ffns and self.moe is None:
            raise ValueError("layer_ffns names MoE layers but the model has no experts")
        return self

    # -- layer pattern -------------------------------------------------------------------------
    def mixers(self) -> tuple[str, ...]:
        """Token mixer of every decoder layer."""
        if self.layer_mixers is not None:
            return self.layer_mixers
        return ("sliding" if self.sliding_window else "full",) * self.num_layers

    def ffns(self) -> tuple[str, ...]:
        """FFN of every decoder layer: dense, moe or none."""
        if self.layer_ffns is not None:
            return self.layer_ffns
        return tuple("moe" if self._moe_rule(i) else "dense" for i in range(self.num_layers))

    def layer_groups(self) -> list[tuple[str, str, int]]:
        """(mixer, ffn, layer count) of each distinct layer kind, in first-seen order."""
        counts: dict[tuple[str, str], int] = {}
        for key in zip(self.mixers(), self.ffns(), strict=True):
            counts[key] = counts.get(key, 0) + 1
        return [(mixer, ffn, n) for (mixer, ffn), n in counts.items()]

    def window_of(self, mixer: str) -> int | None:
        """Keys a query of a `mixer` layer attends at most (None: every key)."""
        if mixer == "sliding":
            return self.sliding_window
        if mixer == "chunked":
            return self.attention_chunk
        if mixer == "sparse":
            return self.sparse_attention.top_k
        return None

    @property
    def uniform_window(self) -> int | None:
        """The window when every attention row of every layer is clipped to the same one
        (Mistral's all-sliding layers): serving statistics may then be clipped up front."""
        kinds = set(self.mixers()) - {"none"}
        if len(kinds) == 1 and kinds <= WINDOWED:
            return self.window_of(kinds.pop())
        return None

    @property
    def mixed_attention(self) -> bool:
        """Whether layers differ in what they attend (a mixer pattern) or attend top-k keys
        (sparse): paths that assume every layer attends every key refuse such models."""
        return self.layer_mixers is not None or self.sparse_attention is not None

    def require_uniform_layers(self, what: str) -> None:
        """Refuse (naming the model's layer kinds) paths that build one layer and repeat it:
        they would price a hybrid, windowed or sparse model as a plain one."""
        if not self.mixed_attention and self.layer_ffns is None:
            return
        kinds = sorted({f"{m}/{f}" for m, f, _ in self.layer_groups()})
        raise InputError("model", f"{what} is modelled for models whose layers are alike; "
                         f"{self.name} has layer kinds {', '.join(kinds)}",
                         "a model without a layer pattern (serve and infer price any)")

    @property
    def num_recurrent_layers(self) -> int:
        """Layers with a recurrent mixer (they hold a fixed-size state per sequence)."""
        return sum(m in RECURRENT for m in self.mixers())

    @property
    def num_attention_layers(self) -> int:
        """Layers with softmax attention (they hold a KV cache)."""
        return sum(m not in RECURRENT and m != "none" for m in self.mixers())

    # -- derived shapes ------------------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        """Width of the attention query projection output."""
        if self.mla:
            return self.num_heads * (self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim)
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def attn_out_dim(self) -> int:
        """Width of the attention output entering the o-projection."""
        return self.num_heads * (self.mla.v_head_dim if self.mla else self.head_dim)

    def _moe_rule(self, layer: int) -> bool:
        return self.moe is not None and self.moe.covers(layer)

    def is_moe_layer(self, layer: int) -> bool:
        """Whether decoder layer `layer` (0-based) has a routed-expert FFN."""
        if self.layer_ffns is not None:
            return self.layer_ffns[layer] == "moe"
        return self._moe_rule(layer)

    @property
    def num_moe_layers(self) -> int:
        return sum(f == "moe" for f in self.ffns())

    def kv_cache_elements_per_token(self) -> int:
        """Elements cached per token per layer: K and V, or MLA's latent plus rope key."""
        if self.mla:  # DeepSeek-V2 paper section 2.1: cache c_KV and k_R only
            return self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        return 2 * self.kv_dim

    # -- parameter counts ------------------------------------------------------------------------
    def attention_params(self) -> int:
        h = self.hidden_size
        if self.mla:
            m = self.mla
            q = h * self.q_dim
            if m.q_lora_rank is not None:
                q = h * m.q_lora_rank + m.q_lora_rank * self.q_dim
            kv_down = h * (m.kv_lora_rank + m.qk_rope_head_dim)
            kv_up = m.kv_lora_rank * self.num_heads * (m.qk_nope_head_dim + m.v_head_dim)
            return q + kv_down + kv_up + self.attn_out_dim * h
        return h * (self.q_dim + 2 * self.kv_dim) + self.attn_out_dim * h

    def ffn_params(self, intermediate: int | None = None) -> int:
        inter = self.intermediate_size if intermediate is None else intermediate
        return (3 if self.gated_mlp else 2) * self.hidden_size * inter

    def mixer_params(self, mixer: str) -> int:
        """Weights of one layer's token mixer."""
        if mixer == "none":
            return 0
        if mixer in RECURRENT:
            lin, h = self.linear_mixer, self.hidden_size
            conv = lin.conv_kernel * (2 * lin.key_heads * lin.key_head_dim + lin.out_width)
            return h * lin.in_width + lin.out_width * h + conv
        params = self.attention_params()
        if mixer == "sparse":
            s = self.sparse_attention  # indexer: q from the q latent (or hidden), one k head
            q_in = self.mla.q_lora_rank if self.mla and self.mla.q_lora_rank else self.hidden_size
            params += (q_in * s.indexer_heads * s.indexer_head_dim
                       + self.hidden_size * (s.indexer_head_dim + s.indexer_heads))
        return params

    def shared_expert_width(self) -> int:
        """Intermediate width of the shared experts together (0 without)."""
        moe = self.moe
        if not moe or not moe.num_shared_experts:
            return 0
        return moe.shared_expert_intermediate_size or (
            moe.num_shared_experts * moe.expert_intermediate_size)

    def ffn_kind_params(self, ffn: str) -> int:
        if ffn == "none":
            return 0
        if ffn == "moe":
            moe = self.moe
            return (moe.num_experts * self.ffn_params(moe.expert_intermediate_size)
                    + self.ffn_params(self.shared_expert_width())
                    + self.hidden_size * moe.num_experts)  # router
        return self.ffn_params()

    def _kind_params(self, mixer: str, ffn: str) -> int:
        norms = (mixer != "none") + (ffn != "none")
        return self.mixer_params(mixer) + self.ffn_kind_params(ffn) + norms * self.hidden_size

    def layer_params(self, layer: int) -> int:
        """Weights of one decoder layer (norm weights included); indices past the decoder
        (an encoder-decoder's encoder layers) are full-attention layers under the MoE rule."""
        if layer < self.num_layers:
            return self._kind_params(self.mixers()[layer], self.ffns()[layer])
        return self._kind_params("full", "moe" if self._moe_rule(layer) else "dense")

    def embedding_params(self) -> int:
        """Token (a ViT: patch-projection) and learned position embeddings."""
        emb = self.vocab_size * self.hidden_size
        if self.image is not None:
            emb = self.image.patch_inputs * self.hidden_size
        if self.position == "learned" and self.max_position_embeddings:
            emb += self.max_position_embeddings * self.hidden_size
        return emb

    def lm_head_params(self) -> int:
        return 0 if self.tied_embeddings else self.vocab_size * self.hidden_size

    def total_params(self) -> int:
        layers = sum(self._kind_params(mixer, ffn) * n for mixer, ffn, n in self.layer_groups())
        if self.kind == "encoder-decoder":  # encoder stack, plus cross-attention per decoder layer
            layers += sum(self.layer_params(i) for i in range(self.num_encoder_layers))
            layers += self.num_layers * self.attention_params()
        return layers + self.embedding_params() + self.lm_head_params()

    def active_params(self) -> int:
        """Parameters touched per token (MoE: only the top-k and shared experts)."""
        if not self.moe:
            return self.total_params()
        moe = self.moe
        unused = (moe.num_experts - moe.experts_per_token) * self.ffn_params(
            moe.expert_intermediate_size
        )
        return self.total_params() - self.num_moe_layers * unused

    @classmethod
    def from_hf_config(cls, config: dict[str, Any], name: str) -> ModelSpec:
        """Build from a parsed HF config.json (see perfcast.specs._hf for the key mapping)."""
        from perfcast.specs._hf import spec_fields

        return cls(name=name, **spec_fields(config))
