"""A multimodal model's image encoding as an operator table: ViT encoder plus projector."""

from __future__ import annotations

import pandas as pd

from perfcast.errors import InputError
from perfcast.ops._batch import Batch
from perfcast.ops._table import OpRows
from perfcast.ops._transformer import _Ctx, _decoder_layers
from perfcast.specs import ModelSpec, ParallelPlan, Precision

__all__ = ["vision_encoder_spec", "vision_ops"]


def vision_encoder_spec(model: ModelSpec) -> ModelSpec:
    """The vision tower as a bidirectional encoder (LayerNorm, plain MLP, biases), so its
    layers reuse the transformer's op rows; refuses a model without a vision config."""
    v = model.vision
    if v is None:
        raise InputError("images", f"{model.name} has no vision_config this version can "
                         "price (a CLIP vision tower, one feature layer)",
                         "0, or a multimodal model such as llava-1.5-7b")
    return ModelSpec(
        name=f"{model.name}/vision", kind="encoder", model_type=v.model_type,
        hidden_size=v.hidden_size, num_layers=max(v.num_layers, 1), num_heads=v.num_heads,
        num_kv_heads=v.num_heads, head_dim=v.head_dim, intermediate_size=v.intermediate_size,
        vocab_size=1, gated_mlp=False, activation=v.activation, norm="layernorm",
        position="learned", attention_bias=True)


def vision_ops(model: ModelSpec, images: int, precision: Precision | None = None,
               plan: ParallelPlan | None = None) -> pd.DataFrame:
    """Kernels that turn `images` images into LLM input embeddings on one GPU of the TP group:
    patch embedding (the stride-p convolution as a GEMM), class + position embeddings,
    pre-LayerNorm, the encoder layers up to the feature layer (bidirectional attention over
    patches + class token), and LLaVA's projector Linear-GELU-Linear over the kept tokens."""
    if images < 1:
        raise InputError("images", f"must be >= 1, got {images}", ">= 1")
    precision, plan = precision or Precision(), plan or ParallelPlan()
    v, enc = model.vision, vision_encoder_spec(model)
    plan.check(enc)
    c = _Ctx(enc, precision, plan, OpRows(), "vision")
    h, tp, tokens = v.hidden_size, plan.tp, images * v.encoder_tokens
    c.gemm("vision_embed", "patch_embed", images * v.patches, h,
           v.num_channels * v.patch_size**2, 1)
    c.vector("vision_embed", "class_pos_embed", "elementwise", tokens, h, reads=2, writes=1,
             count=1)
    c.vector("vision_embed", "pre_layernorm", "norm", tokens, h, reads=1, writes=1, count=1,
             flops_per_elem=4)
    if v.num_layers:
        start = len(c.rows.rows)
        _decoder_layers(c, Batch.prefill(images, v.encoder_tokens), causal=False)
        for row in c.rows.rows[start:]:
            row["layer"] = "vision_" + row["layer"]
    kept, p = images * v.image_tokens, v.projector_hidden_size
    c.gemm("projector", "linear_1", kept, p / tp, h, 1)  # column-parallel
    c.vector("projector", "act", "activation", kept, p / tp, reads=1, writes=1, count=1,
             flops_per_elem=8)
    c.gemm("projector", "linear_2", kept, p, p / tp, 1)  # row-parallel
    c.collective("projector", "projector_allreduce", "allreduce", kept * p * c.vec_b, tp, 1)
    return c.rows.frame()
