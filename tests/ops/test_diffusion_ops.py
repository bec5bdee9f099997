"""SDXL's op tables: the architecture (parameter counts), FLOPs by hand, shapes and errors."""

import pytest

from perfcast.errors import InputError
from perfcast.ops import (
    COLUMNS,
    scheduler_ops,
    text_encoder_ops,
    unet_ops,
    vae_decode_ops,
    weight_params,
)
from perfcast.specs import get_diffusion_model

SDXL = get_diffusion_model("sdxl-base")
LATENT = (128, 128)  # 1024 px / 8


def total(ops, column="flops"):
    return float((ops[column] * ops["count"]).sum())


@pytest.fixture(scope="module")
def unet1():
    return unet_ops(SDXL.unet, 1, LATENT)


def test_unet_parameters_match_the_published_count(unet1):
    # diffusers' SDXL base UNet: 2,567,463,684 parameters; the table's weights leave out
    # biases and norm affines (~1.6 M), so it must land just below, within 2% (here 0.1%).
    params = weight_params(unet1)
    assert params == pytest.approx(2_567_463_684, rel=0.02)
    assert 2_567_463_684 - 3e6 < params < 2_567_463_684


def test_vae_decoder_and_text_encoder_parameters():
    assert weight_params(vae_decode_ops(SDXL.vae, 1, LATENT)) == pytest.approx(49.5e6, rel=0.02)
    # CLIP text towers: per layer 4h² (q, k, v, out) + 2·h·ffn, plus token/position tables.
    published = (123.06e6, 694.66e6)  # CLIP ViT-L/14, OpenCLIP ViT-bigG/14 text encoders
    for cfg, n in zip(SDXL.text_encoders, published, strict=True):
        h, f, layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
        by_hand = layers * (4 * h * h + 2 * h * f) + (cfg.projection_dim * h
                                                      if cfg.with_projection else 0)
        ops = text_encoder_ops(cfg, 1)
        assert weight_params(ops) == by_hand
        assert by_hand + h * (cfg.vocab_size + 77) == pytest.approx(n, rel=0.005)


def test_unet_gemm_flops_by_hand(unet1):
    # Transformer blocks: 18c² weights per token (self q, k, v, out 4c²; cross q, out 2c²;
    # GEGLU 8c² + out 4c²) + cross-attention k, v on 77 text tokens of width 2048.
    # SDXL: 10 blocks of c=640 on 64x64 tokens, 60 blocks of c=1280 on 32x32 tokens.
    def blocks(c, tokens, n):
        return n * (2 * tokens * 18 * c * c + 2 * 2 * 77 * 2048 * c)

    block_rows = unet1[unet1["layer"].str.endswith(".block") & (unet1["family"] == "gemm")]
    assert total(block_rows) == pytest.approx(blocks(640, 64 * 64, 10)
                                              + blocks(1280, 32 * 32, 60), rel=1e-12)
    # Self-attention: 4·tokens²·c per block (QK^T and PV over all heads); cross: 4·tokens·77·c
    attn = unet1[unet1["family"] == "attn_prefill"]
    by_hand = sum(n * 4 * t * c * (t + 77) for c, t, n in ((640, 4096, 10), (1280, 1024, 60)))
    assert total(attn) == pytest.approx(by_hand, rel=1e-12)
    conv_in = unet1[unet1["layer"] == "conv_in"].iloc[0]
    assert conv_in["flops"] == 2 * 128 * 128 * 320 * 4 * 9


def test_unet_flops_per_step_range(unet1):
    # ~6.8 TFLOPs per image per forward at 1024² (transformer GEMMs 4.2 T, convs ~1.8 T,
    # attention 0.78 T): "about 6 TFLOPs" as usually quoted; CFG's batch 2 doubles it.
    per_image = total(unet1)
    assert 6.0e12 < per_image < 7.5e12
    assert total(unet_ops(SDXL.unet, 2, LATENT)) == pytest.approx(2 * per_image, rel=1e-12)


@pytest.mark.parametrize("edge", [64, 96, 128])
def test_convs_scale_with_pixels_and_attention_faster(edge):
    small, big = unet_ops(SDXL.unet, 1, (edge, edge)), unet_ops(SDXL.unet, 1, (2 * edge,) * 2)
    gemm = [total(t[t["family"] == "gemm"]) for t in (small, big)]
    attn = [total(t[t["family"] == "attn_prefill"]) for t in (small, big)]
    # weight GEMMs grow 4x with 4x pixels except the per-image embeddings and text k/v
    assert 3.85 < gemm[1] / gemm[0] <= 4.0
    assert attn[1] / attn[0] > 4.0  # self-attention is quadratic in tokens


def test_tables_have_the_common_columns_and_positive_work(unet1):
    for ops in (unet1, vae_decode_ops(SDXL.vae, 1, LATENT, "fp32"),
                text_encoder_ops(SDXL.text_encoders[1], 2),
                scheduler_ops(1, 4, LATENT, guidance=True)):
        assert list(ops.columns) == COLUMNS
        assert (ops["count"] >= 1).all()
        assert ((ops["bytes_read"] + ops["bytes_written"]) > 0).all()


def test_fp32_vae_convolutions_use_tf32_math():
    ops = vae_decode_ops(SDXL.vae, 1, LATENT, "fp32")
    convs = ops[ops["op"].str.startswith("conv")]
    assert set(convs["dtype"]) == {"tf32"}
    assert set(ops[ops["op"] == "to_q"]["dtype"]) == {"fp32"}
    assert ops[ops["op"] == "conv3x3"]["m"].max() == 1024 * 1024  # last block at full size
    no_tf32 = vae_decode_ops(SDXL.vae, 1, LATENT, "fp32", tf32=False)  # e.g. a T4
    assert set(no_tf32[no_tf32["op"].str.startswith("conv")]["dtype"]) == {"fp32"}


def test_latent_not_divisible_is_refused():
    with pytest.raises(InputError) as err:
        unet_ops(SDXL.unet, 1, (102, 128))
    assert err.value.field == "latent_size" and "4" in err.value.allowed
