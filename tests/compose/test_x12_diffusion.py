"""Scenario X12: Stable Diffusion XL, 30 steps, 1024², on 1xA100 - latency per image."""

import pytest

from perfcast.compose import forecast_diffusion, vae_dtype
from perfcast.errors import InputError
from perfcast.kernels import PhysicsModel, RooflineModel, shipped_calibration
from perfcast.specs import DType, cluster_for, get_device, get_diffusion_model

SDXL = get_diffusion_model("sdxl-base")
ROOF = RooflineModel()


def fc(box, **kw):
    kw.setdefault("time_model", ROOF)
    return forecast_diffusion(SDXL, box, **kw)


@pytest.fixture(scope="module")
def x12(a100_box):
    return fc(a100_box, steps=30, resolution=1024,
              time_model=PhysicsModel(shipped_calibration()))


def test_x12_latency_is_the_sum_of_its_parts(x12):
    parts = x12.text_encode_s + x12.unet_total_s + x12.scheduler_total_s + x12.vae_decode_s
    assert x12.latency_s == pytest.approx(parts, rel=1e-12)
    assert x12.unet_total_s == pytest.approx(30 * x12.unet_step_s, rel=1e-12)
    assert x12.unet_batch == 2 and x12.vae_dtype == "fp32"
    # The UNet dominates; the whole call takes seconds on an A100, not ms or minutes.
    assert x12.unet_total_s > 0.8 * x12.latency_s
    assert 1.0 < x12.latency_s < 15.0
    low, high = x12.interval_s
    assert low < x12.latency_s < high


def test_x12_json_keys(x12):
    out = x12.as_dict()
    for key in ("latency_s", "unet_step_s", "unet_total_s", "vae_decode_s", "text_encode_s",
                "unet_gflops_per_step", "memory_bytes", "unet_params"):
        assert key in out
    assert out["unet_gflops_per_step"] == pytest.approx(2 * 6768.1, rel=1e-3)
    assert out["memory_bytes"]["weights_bytes"] > 2 * 2.56e9  # fp16 UNet alone


def test_calibrated_kernels_never_beat_the_roofline(x12, a100_box):
    roof = fc(a100_box)
    assert x12.unet_step_s >= roof.unet_step_s and x12.vae_decode_s >= roof.vae_decode_s


def test_latency_grows_with_steps_and_resolution(a100_box):
    by_steps = [fc(a100_box, steps=s).latency_s for s in (1, 10, 30, 50)]
    assert by_steps == sorted(by_steps) and len(set(by_steps)) == 4
    by_res = [fc(a100_box, steps=4, resolution=r).latency_s for r in (512, 768, 1024)]
    assert by_res == sorted(by_res) and len(set(by_res)) == 3
    # the step-independent part (text + VAE) is what 1 step adds beyond the UNet step
    one, many = fc(a100_box, steps=1), fc(a100_box, steps=50)
    step = one.unet_step_s + one.scheduler_total_s
    assert many.latency_s - one.latency_s == pytest.approx(49 * step, rel=1e-9)


def test_guidance_doubles_the_unet_at_large_batch(a100_box):
    on = fc(a100_box, batch=4, steps=2, guidance=True)
    off = fc(a100_box, batch=4, steps=2, guidance=False)
    assert on.unet_batch == 8 and off.unet_batch == 4
    assert 1.8 < on.unet_step_s / off.unet_step_s < 2.1
    assert on.unet_flops_per_step == pytest.approx(2 * off.unet_flops_per_step, rel=1e-12)


def test_negative_prompt_encodes_twice(a100_box):
    zero = fc(a100_box, steps=1)
    neg = fc(a100_box, steps=1, negative_prompt=True)
    assert neg.text_encode_s == pytest.approx(2 * zero.text_encode_s, rel=1e-12)


def test_gpu_without_tf32_decodes_in_plain_fp32():
    t4 = cluster_for(get_device("t4"), 1)
    f = fc(t4, steps=1)
    convs = f.vae.ops[f.vae.ops["op"].str.startswith("conv")]
    assert f.vae_dtype == "fp32" and set(convs["dtype"]) == {"fp32"}


def test_vae_upcast_rule():
    assert vae_dtype(SDXL, DType.FP16) == DType.FP32
    assert vae_dtype(SDXL, DType.BF16) == DType.BF16


@pytest.mark.parametrize("resolution", [1000, 16, (1024, 1000)])
def test_bad_resolution_names_the_field(a100_box, resolution):
    with pytest.raises(InputError) as err:
        fc(a100_box, resolution=resolution)
    assert err.value.field == "resolution" and "32" in err.value.allowed


def test_other_bad_inputs(a100_box):
    with pytest.raises(InputError) as err:
        fc(a100_box, dtype="fp8")
    assert err.value.field == "dtype" and "fp16" in err.value.allowed
    with pytest.raises(InputError) as err:
        fc(a100_box, steps=0)
    assert err.value.field == "steps"
    with pytest.raises(InputError) as err:
        fc(a100_box, batch=64)  # decoding 64 images at 1024² in fp32 needs > 80 GB
    assert err.value.field == "memory"
    with pytest.raises(InputError) as err:
        get_diffusion_model("sdxl-bsae")
    assert err.value.field == "model" and "sdxl-base" in str(err.value)
