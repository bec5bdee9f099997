"""SCENARIOS.md X10: LLaVA-1.5-7B, CLIP ViT-L/14-336 encoder + projector + Vicuna-7B on
1xA100: TTFT including image encoding, TPOT, through `forecast_inference(images=...)`."""

import pytest

from perfcast.compose import forecast_inference, step_time
from perfcast.errors import InputError
from perfcast.kernels import PhysicsModel, RooflineModel, shipped_calibration
from perfcast.specs import cluster_for, get_device, get_model

H, MLP = 1024, 4096  # ViT-L/14: hidden, MLP width
ENC_TOKENS, KEPT = 577, 576  # (336 / 14)^2 patches + class token; the class token is dropped
LAYERS = 23  # vision_feature_layer -2: the 24th layer's output is never read


@pytest.fixture(scope="module")
def llava():
    return get_model("llava-1.5-7b")


@pytest.fixture(scope="module")
def a100():
    return cluster_for(get_device("a100-sxm4-80gb"), 1)


def _run(model, box, images, prompt=512, output=64, **kw):
    return forecast_inference(model, box, prompt_tokens=prompt, output_tokens=output,
                              images=images, **kw)


def test_vision_config_is_read(llava):
    v = llava.vision
    assert (v.hidden_size, v.num_heads, v.intermediate_size, v.num_layers) == (H, 16, MLP, LAYERS)
    assert (v.patches, v.encoder_tokens, v.image_tokens) == (576, ENC_TOKENS, KEPT)
    assert v.projector_hidden_size == llava.hidden_size == 4096
    # all 24 layers + post-LayerNorm: CLIP ViT-L/14-336's vision tower, 303,507,456 weights
    full = v.model_copy(update={"num_layers": 24})
    assert full.encoder_params() + 2 * H == 303_507_456
    assert get_model("llama-2-7b").vision is None


def test_encoder_flops_match_a_hand_count(llava, a100):
    ops = _run(llava, a100, 1).vision.ops
    matmul_params = 4 * H * H + 2 * H * MLP  # q, k, v, o + fc1, fc2
    hand = (2 * matmul_params * ENC_TOKENS * LAYERS
            + 4 * ENC_TOKENS**2 * H * LAYERS  # QK^T and PV over all 577 x 577 pairs
            + 2 * KEPT * (3 * 14 * 14) * H  # patch embedding (conv as GEMM)
            + 2 * KEPT * (H * 4096 + 4096 * 4096))  # projector
    assert (ops["flops"] * ops["count"]).sum() == pytest.approx(hand, rel=0.01)


def test_ttft_is_encoding_plus_prefill_of_the_longer_prompt(llava, a100):
    f = _run(llava, a100, 1)
    text_only = _run(llava, a100, 0, prompt=512 + KEPT)
    assert f.image_tokens == KEPT
    assert f.prefill.time_s == text_only.ttft_s
    assert f.vision_encode_s == f.vision.time_s == pytest.approx(
        f.vision.ops["total_s"].sum(), rel=1e-12)
    assert f.ttft_s == f.vision_encode_s + f.prefill.time_s
    assert f.tpot_s == text_only.tpot_s  # only the longer context reaches decode
    assert f.e2e_s == pytest.approx(f.ttft_s + 63 * f.tpot_s)
    assert f.breakdown()["total_s"].sum() == pytest.approx(f.e2e_s)
    low, high = f.intervals_s()["ttft_s"]
    assert low < f.ttft_s < high


def test_vision_step_priced_by_the_same_kernel_model(llava, a100):
    cal = PhysicsModel(shipped_calibration())
    f = _run(llava, a100, 1, time_model=cal)
    assert f.vision_encode_s == step_time(f.vision.ops.drop(columns=["time_s", "total_s"]),
                                          a100, time_model=cal).time_s
    roofline = _run(llava, a100, 1, time_model=RooflineModel()).vision_encode_s
    assert f.vision_encode_s > roofline  # calibrated >= roofline
    assert _run(llava, a100, 1).vision_encode_s == f.vision_encode_s  # the default


@pytest.mark.parametrize("time_model", [RooflineModel(), PhysicsModel(shipped_calibration())],
                         ids=["roofline", "calibrated"])
def test_monotone_in_images(llava, a100, time_model):
    runs = [_run(llava, a100, n, output=2, time_model=time_model) for n in range(4)]
    for a, b in zip(runs[:-1], runs[1:], strict=True):
        assert b.image_tokens == a.image_tokens + KEPT
        assert b.vision_encode_s > a.vision_encode_s and b.ttft_s > a.ttft_s
        if isinstance(time_model, RooflineModel):  # calibrated decode: not monotone in context
            assert b.tpot_s >= a.tpot_s


def test_vision_weights_are_resident(llava, a100):
    with_tower, text = _run(llava, a100, 1), _run(llava.model_copy(update={"vision": None}),
                                                  a100, 0, prompt=512 + KEPT)
    extra = with_tower.memory.weights_bytes - text.memory.weights_bytes
    assert extra == llava.vision.params() * 2  # bf16
    assert 0.30e9 < llava.vision.params() < 0.32e9  # 23 ViT-L layers + 21 M projector


def test_images_refused_without_a_vision_tower(a100):
    with pytest.raises(InputError) as err:
        _run(get_model("llama-2-7b"), a100, 1)
    assert err.value.field == "images" and "vision_config" in str(err.value)
    with pytest.raises(InputError) as err:
        _run(get_model("llava-1.5-7b"), a100, -1)
    assert err.value.field == "images"
