"""`perfcast diffusion` (X12) and `perfcast rag` (X9): JSON keys, tables, errors, kwargs calls."""

import json

from typer.testing import CliRunner

from perfcast.cli import app
from perfcast.cli._diffusion import diffusion
from perfcast.cli._rag import rag

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args))


def test_diffusion_json_answers_x12():
    res = run("diffusion", "--model", "sdxl-base", "--gpu", "a100-sxm4-80gb", "--steps", "30",
              "--resolution", "1024", "--kernel-model", "roofline", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    parts = (out["text_encode_s"] + out["unet_total_s"] + out["scheduler_total_s"]
             + out["vae_decode_s"])
    assert abs(out["latency_s"] - parts) < 1e-9 * parts
    assert out["unet_batch"] == 2 and out["inputs"]["height_px"] == 1024
    assert 13_000 < out["unet_gflops_per_step"] < 14_000
    no_cfg = json.loads(run("diffusion", "--gpu", "a100-sxm4-80gb", "--no-guidance",
                            "--kernel-model", "roofline", "--json").stdout)
    assert no_cfg["unet_batch"] == 1 and no_cfg["unet_step_s"] < out["unet_step_s"]


def test_diffusion_table_and_bad_resolution():
    res = run("diffusion", "--gpu", "a100-sxm4-80gb", "--steps", "2", "--kernel-model",
              "roofline")
    assert res.exit_code == 0, res.output
    assert "UNet step (batch 2)" in res.stdout and "VAE decode (fp32)" in res.stdout
    bad = run("diffusion", "--gpu", "a100-sxm4-80gb", "--resolution", "1000")
    assert bad.exit_code == 2
    assert "resolution" in bad.output and "Traceback" not in bad.output


def test_rag_json_answers_x9():
    res = run("rag", "--gpu", "h100-sxm", "--index-vectors", "1000000", "--index", "ivf-pq",
              "--nprobe", "16", "--nlist", "4096", "--output-tokens", "32",
              "--kernel-model", "roofline", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert abs(sum(out["breakdown"].values()) - out["e2e_s"]) < 1e-9
    assert out["prompt_tokens"] == 32 + 5 * 512
    assert out["inputs"]["index"]["dim"] == 1024  # bge-large's width by default
    assert set(out["search_ops_s"]) == {"coarse_scan", "coarse_select", "lut_build",
                                        "code_scan", "topk"}


def test_rag_errors_are_one_line():
    for args, field in ((("--index", "hnsw"), "index"), (("--search-device", "tpu"),
                                                         "search_device"),
                        (("--search-device", "cpu", "--cpu", "h100-sxm"), "cpu")):
        res = run("rag", "--gpu", "h100-sxm", *args)
        assert res.exit_code == 2 and field in res.output, res.output


def test_commands_take_plain_keyword_arguments(capsys):
    diffusion(gpu="a100-sxm4-80gb", steps=3, kernel_model="roofline", json_out=True)
    d = json.loads(capsys.readouterr().out)
    rag(gpu="h100-sxm", index="ivf-flat", output_tokens=8, kernel_model="roofline",
        json_out=True)
    r = json.loads(capsys.readouterr().out)
    assert d["inputs"]["steps"] == 3 and r["inputs"]["index"]["kind"] == "ivf-flat"
