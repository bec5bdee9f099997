"""The rest of a latent-diffusion pipeline as op tables: the VAE decoder (diffusers
`AutoencoderKL.decode`), the CLIP text encoders, and the sampler's per-step elementwise work.
Row conventions as in perfcast.ops._diffusion (convolutions are implicit-GEMM `gemm` rows)."""

from __future__ import annotations

import pandas as pd

from perfcast.ops._diffusion import _ACT_FLOPS, _NORM_FLOPS, Builder, conv_math
from perfcast.specs import DType

__all__ = ["scheduler_ops", "text_encoder_ops", "vae_decode_ops"]


def _vae_attention(bld: Builder, layer: str, c: int, size: tuple[int, int], groups: int) -> None:
    """The decoder mid-block's single-head self-attention over every latent pixel."""
    hw = size[0] * size[1]
    t = bld.batch * hw
    bld.group_norm(layer, c, hw, groups)
    bld.vector(layer, "to_tokens", "elementwise", t, c)
    for proj in ("to_q", "to_k", "to_v"):
        bld.gemm(layer, proj, t, c, c)
    bld.attention(layer, "attn", hw, hw, heads=1, head_dim=c)
    bld.gemm(layer, "to_out", t, c, c)
    bld.vector(layer, "to_channels", "elementwise", t, c)
    bld.vector(layer, "residual_add", "elementwise", t, c, reads=2)


def vae_decode_ops(vae, batch: int, latent_size: tuple[int, int],
                   dtype: DType | str = "fp16", tf32: bool = True) -> pd.DataFrame:
    """One `AutoencoderKL.decode` of `batch` latents of `latent_size` = (h, w): unscale,
    post_quant_conv, conv_in, mid block (resnet, attention, resnet), the up blocks
    (layers_per_block + 1 resnets each, nearest-2x upsample + conv on all but the last),
    GN-SiLU-conv_out, and the [-1, 1] -> [0, 1] image postprocess. `vae` is a
    perfcast.specs VAEConfig; `dtype` the dtype it runs in (see compose.vae_dtype); `tf32`
    whether its fp32 convolutions may use TF32."""
    dtype = DType(dtype)
    bld = Builder(int(batch), dtype, conv_math(dtype, tf32))
    size = tuple(int(s) for s in latent_size)
    g, rev = vae.norm_num_groups, list(reversed(vae.block_out_channels))
    lat = vae.latent_channels
    bld.vector("unscale", "div", "elementwise", bld.batch * lat, size[0] * size[1])
    bld.conv("post_quant_conv", lat, lat, size, kernel=1)
    size = bld.conv("conv_in", lat, rev[0], size)
    c = rev[0]
    bld.resnet("mid.resnet0", c, c, size, g, temb=None)
    if vae.mid_block_add_attention:
        _vae_attention(bld, "mid.attn", c, size, g)
    bld.resnet("mid.resnet1", c, c, size, g, temb=None)
    for lvl, c_out in enumerate(rev):
        for j in range(vae.layers_per_block + 1):
            bld.resnet(f"up{lvl}.resnet{j}", c, c_out, size, g, temb=None)
            c = c_out
        if lvl < len(rev) - 1:
            size = bld.upsample(f"up{lvl}.upsample", c, size)
    bld.conv_out(c, vae.out_channels, size, g)
    bld.vector("postprocess", "denormalize_clamp", "elementwise", bld.batch * vae.out_channels,
               size[0] * size[1], count=2)
    return bld.frame()


def text_encoder_ops(cfg, batch: int, dtype: DType | str = "fp16") -> pd.DataFrame:
    """One CLIP text-encoder forward (transformers CLIPTextModel[WithProjection]) over
    `batch` prompts of `max_position_embeddings` (77) tokens: embeddings, pre-LN layers with
    causal attention and a 4x MLP, final LN, and text_projection of the pooled token.
    Every layer runs even where a pipeline reads the penultimate hidden state (SDXL)."""
    bld = Builder(int(batch), DType(dtype), DType(dtype))
    seq, h, inter = cfg.max_position_embeddings, cfg.hidden_size, cfg.intermediate_size
    heads, layers = cfg.num_attention_heads, cfg.num_hidden_layers
    t = bld.batch * seq
    bld.vector("embeddings", "token_position_embed", "embedding", t, h, reads=2,
               flops_per_elem=1.0)
    for i, name in enumerate(("self_attn", "mlp")):
        bld.vector("layer", f"layer_norm{i + 1}", "norm", t, h, count=layers,
                   flops_per_elem=_NORM_FLOPS)
        if name == "self_attn":
            for proj in ("q_proj", "k_proj", "v_proj"):
                bld.gemm("layer", proj, t, h, h, layers)
            bld.attention("layer", "attn", seq, seq, heads, h // heads, count=layers,
                          causal=True)
            bld.gemm("layer", "out_proj", t, h, h, layers)
        else:
            bld.gemm("layer", "fc1", t, inter, h, layers)
            bld.vector("layer", cfg.hidden_act, "activation", t, inter, count=layers,
                       flops_per_elem=_ACT_FLOPS)
            bld.gemm("layer", "fc2", t, h, inter, layers)
        bld.vector("layer", f"{name}.residual_add", "elementwise", t, h, reads=2,
                   count=layers)
    bld.vector("final", "final_layer_norm", "norm", t, h, flops_per_elem=_NORM_FLOPS)
    if cfg.with_projection:
        bld.gemm("final", "text_projection", bld.batch, cfg.projection_dim, h)
    return bld.frame()


def scheduler_ops(batch: int, latent_channels: int, latent_size: tuple[int, int],
                  guidance: bool, dtype: DType | str = "fp16") -> pd.DataFrame:
    """A sampler step's elementwise kernels on the latents around each UNet call (Euler,
    diffusers' SDXL default): duplicate for guidance, scale_model_input; after the UNet the
    guidance mix uncond + g·(text - uncond) (sub, mul, add); the Euler update (derivative,
    dt step), on `batch` images' latents."""
    bld = Builder(int(batch), DType(dtype), DType(dtype))
    rows, width = bld.batch * latent_channels, latent_size[0] * latent_size[1]
    if guidance:
        bld.vector("scheduler", "cfg_duplicate", "elementwise", rows, width, writes=2)
    bld.vector("scheduler", "scale_model_input", "elementwise", rows, width * (1 + guidance))
    if guidance:
        bld.vector("scheduler", "cfg_mix", "elementwise", rows, width, reads=2, count=3)
    bld.vector("scheduler", "euler_update", "elementwise", rows, width, reads=2, count=3)
    return bld.frame()
