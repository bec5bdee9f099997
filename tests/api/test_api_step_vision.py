"""`perfcast step` for image models: a torchvision ResNet's inference forward (images/s, no
tokens, transformer-only options refused) and ViT-B/16 (197 tokens fixed by its image)."""

import json

import pytest
from typer.testing import CliRunner

from perfcast.api import StepRequest, run
from perfcast.cli import app
from perfcast.errors import InputError

runner = CliRunner()


def _payload(**options) -> dict:
    return json.loads(json.dumps(run(StepRequest.from_options(options)).payload()))


def test_resnet50_bf16_is_faster_than_fp32_on_l4_at_batch_64():
    fp32 = _payload(model="resnet50", gpu="l4", dtype="fp32", batch=64)
    bf16 = _payload(model="resnet50", gpu="l4", dtype="bf16", batch=64)
    assert bf16["time_s"] < fp32["time_s"]
    assert bf16["images_per_s"] == pytest.approx(64 / bf16["time_s"])
    assert bf16["tokens_per_s"] is None and bf16["inputs"]["seq_len"] is None
    assert bf16["interval_s"]["low"] <= bf16["time_s"] <= bf16["interval_s"]["high"]
    assert bf16["breakdown"] and bf16["kernels"] > 100
    assert {"stack", "execution", "kernel_model"} <= set(bf16["inputs"])
    assert isinstance(bf16["notes"], list)


def test_cnn_step_prices_what_cnn_inference_prices():
    """The step is compose.cnn_inference under the stack's launch mode, fusion and host
    costs; --fused folds batch norms and ReLUs into the convs (fewer launches)."""
    from perfcast.api import resolve
    from perfcast.compose._vision import cnn_inference
    request = StepRequest.from_options({"model": "resnet50", "gpu": "l4", "dtype": "bf16",
                                        "batch": 8})
    r = resolve(request)
    fc = cnn_inference("resnet50", 8, r.machines, "bf16", r.stack.execution, r.stack.fused,
                       r.time_model, host_s=r.stack.host_s, dispatch_s=r.stack.dispatch_s,
                       host_spread=r.stack.host_spread)
    result = run(request)
    assert result.time_s == fc.step.time_s and result.step.interval_s == fc.step.interval_s
    assert r.stack.host_spread != (1.0, 1.0)  # the eager stack's range of hosts reaches CNNs
    fused = _payload(model="resnet50", gpu="l4", dtype="bf16", batch=8, fused=True)
    assert fused["kernels"] < _payload(model="resnet50", gpu="l4", dtype="bf16",
                                       batch=8)["kernels"]


@pytest.mark.parametrize(("option", "value"), [
    ("seq_len", 128), ("context", 8), ("logits", "last"), ("tp", 2), ("dp", 2),
    ("recompute", True), ("optimizer", "sgd")])
def test_transformer_options_are_refused_for_a_cnn(option, value):
    with pytest.raises(InputError) as err:
        run(StepRequest.from_options({"model": "resnet50", option: value}))
    assert err.value.field == option


@pytest.mark.parametrize("mode", ["training", "decode"])
def test_cnn_training_points_at_perfcast_train(mode):
    with pytest.raises(InputError) as err:
        run(StepRequest.from_options({"model": "resnet50", "mode": mode}))
    assert err.value.field == "mode" and "perfcast train --model resnet50" in str(err.value)


def test_vit_b16_is_priced_with_its_197_tokens():
    p = _payload(model="vit-b16", gpu="l4", dtype="bf16", batch=64)
    assert p["inputs"]["seq_len"] == 197 == _payload(model="vit-b16", gpu="l4",
                                                     seq_len=197)["inputs"]["seq_len"]
    assert p["images_per_s"] == pytest.approx(64 / p["time_s"])
    assert p["tokens_per_s"] == pytest.approx(64 * 197 / p["time_s"])
    assert p["inputs"]["attention"] == "sdpa" and p["memory_per_gpu_bytes"] > 0
    fp32 = _payload(model="vit-b16", gpu="l4", dtype="fp32", batch=64)
    assert p["time_s"] < fp32["time_s"]


@pytest.mark.parametrize(("options", "field"), [
    ({"seq_len": 196}, "seq_len"), ({"logits": "last"}, "logits"),
    ({"mode": "decode", "context": 4}, "mode")])
def test_vit_refuses_what_its_image_fixes(options, field):
    with pytest.raises(InputError) as err:
        run(StepRequest.from_options({"model": "vit-b16", **options}))
    assert err.value.field == field


@pytest.mark.parametrize("args", [
    ["--model", "resnet50", "--mode", "training"], ["--model", "resnet50", "--seq-len", "64"],
    ["--model", "resnet50", "--tp", "2"], ["--model", "vit-b16", "--seq-len", "128"]])
def test_refusals_exit_2_on_the_cli(args):
    res = runner.invoke(app, ["step", *args])
    assert res.exit_code == 2, res.output


def test_cli_prints_images_per_s_and_the_json_matches_the_api():
    res = runner.invoke(app, ["step", "--model", "resnet50", "--gpu", "l4", "--dtype", "bf16",
                              "--batch", "4", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == _payload(model="resnet50", gpu="l4", dtype="bf16",
                                              batch=4)
    table = runner.invoke(app, ["step", "--model", "vit-b16", "--gpu", "l4"])
    assert table.exit_code == 0 and "images/s" in table.output
