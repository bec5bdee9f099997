"""A transformer's architecture, read from a HuggingFace config.json."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from perfcast.specs._vision import VisionSpec

__all__ = ["ImageSpec", "ModelSpec", "MoESpec", "MLASpec"]

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

    @model_validator(mode="after")
    def _heads_group(self) -> ModelSpec:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads "
                f"({self.num_kv_heads})"
            )
        return self

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

    def is_moe_layer(self, layer: int) -> bool:
        """Whether decoder layer `layer` (0-based) has a routed-expert FFN (HF DeepSeek rule)."""
        moe = self.moe
        return bool(moe) and layer >= moe.first_dense_layers and layer % moe.layer_freq == 0

    @property
    def num_moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.num_layers))

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

    def layer_params(self, layer: int) -> int:
        """Weights of one decoder layer (norm weights included)."""
        if self.is_moe_layer(layer):
            moe = self.moe
            experts = moe.num_experts + moe.num_shared_experts
            ffn = experts * self.ffn_params(moe.expert_intermediate_size)
            ffn += self.hidden_size * moe.num_experts  # router
        else:
            ffn = self.ffn_params()
        return self.attention_params() + ffn + 2 * self.hidden_size

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
        layers = sum(self.layer_params(i) for i in range(self.num_layers))
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
