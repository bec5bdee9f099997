"""`perfcast infer --cp` (X2) and `--images` (X10): options reach the forecast, JSON keys."""

import json

import pytest
import typer
from typer.testing import CliRunner

from perfcast.cli import app
from perfcast.cli._infer import infer

runner = CliRunner()


def run_json(*args):
    res = runner.invoke(app, ["infer", *args, "--kernel-model", "roofline", "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_x2_cp4_json():
    args = ("--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prompt-tokens", "131072",
            "--output-tokens", "2")
    one, four = run_json(*args), run_json(*args, "--cp", "4")
    assert four["inputs"]["cp"] == 4 and one["context_parallel"] is None
    assert 0.25 * one["ttft_s"] <= four["ttft_s"] < one["ttft_s"]
    mem1, mem4 = one["memory_bytes"], four["memory_bytes"]
    assert mem4["kv_cache_bytes"] == pytest.approx(mem1["kv_cache_bytes"] / 4, rel=1e-4)
    assert mem4["weights_bytes"] == mem1["weights_bytes"]
    assert mem4["total_bytes"] == pytest.approx(sum(
        mem4[k] for k in ("weights_bytes", "kv_cache_bytes", "activation_bytes",
                          "runtime_bytes")))
    cp = four["context_parallel"]
    assert cp["kv_ring_bytes"] == 3 * 32 * 32768 * 4096
    assert 0 <= cp["ring_exposed_s"] <= cp["ring_comm_s"]
    assert four["breakdown"]["prefill"]["family.sendrecv"] == cp["ring_exposed_s"]


def test_x2_num_gpus_must_match_tp_times_cp():
    res = runner.invoke(app, ["infer", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                              "--cp", "4", "--num-gpus", "2"])
    assert res.exit_code == 2 and "num_gpus" in res.output
    res = runner.invoke(app, ["infer", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                              "--cp", "0"])
    assert res.exit_code == 2 and "cp" in res.output


def test_x10_llava_json():
    base = ("--model", "llava-1.5-7b", "--gpu", "a100-sxm4-80gb", "--prompt-tokens", "64",
            "--output-tokens", "8")
    text, image = run_json(*base), run_json(*base, "--images", "1")
    assert image["image_tokens"] == 576 and text["image_tokens"] == 0
    assert image["vision_encode_s"] > 0 == text["vision_encode_s"]
    assert image["ttft_s"] == pytest.approx(
        image["vision_encode_s"] + image["breakdown"]["prefill"]["kernels_s"]
        + image["breakdown"]["prefill"]["comm_s"] + image["breakdown"]["prefill"]["host_s"])
    assert image["tpot_s"] >= text["tpot_s"]
    assert image["breakdown"]["vision_encode"]["kernels_s"] > 0


def test_images_refused_for_a_text_model():
    res = runner.invoke(app, ["infer", "--model", "llama-2-7b", "--gpu", "a100-sxm4-80gb",
                              "--images", "1"])
    assert res.exit_code == 2
    assert "images" in res.output and "vision_config" in res.output


def test_command_function_takes_keyword_defaults(capsys):
    """The scenario suite calls commands directly with keyword arguments."""
    infer(model="llava-1.5-7b", gpu="a100-sxm4-80gb", images=2, output_tokens=4,
          kernel_model="roofline", json_out=True)
    out = json.loads(capsys.readouterr().out)
    assert out["image_tokens"] == 1152 and out["inputs"]["images"] == 2
    with pytest.raises(typer.Exit) as err:
        infer(model="llama-3.1-8b", gpu="h100-sxm", cp=0, json_out=True)
    assert err.value.exit_code == 2 and "cp" in capsys.readouterr().err
