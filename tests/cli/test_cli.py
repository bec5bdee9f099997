import json

import pytest
from typer.testing import CliRunner

from perfcast.cli import app
from perfcast.specs import get_model, model_names


def _one_per_architecture() -> list[str]:
    """A catalog model per (model_type, layer kinds): the CLI path once per architecture;
    tests/specs/test_catalog_models.py prices every catalog model through the library."""
    seen: dict[tuple, str] = {}
    for name in model_names():
        spec = get_model(name)
        kinds = frozenset((mixer, ffn) for mixer, ffn, _ in spec.layer_groups())
        seen.setdefault((spec.model_type, kinds, spec.mla is not None), name)
    return list(seen.values())

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args))


def test_infer_json_has_the_documented_keys():
    res = run("infer", "--model", "llama-2-7b", "--gpu", "a100-sxm4-80gb", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    for key in ("ttft_s", "tpot_s", "e2e_s", "throughput_tok_s", "memory_bytes", "breakdown"):
        assert key in out
    assert out["memory_bytes"]["total_bytes"] > out["memory_bytes"]["weights_bytes"] > 13e9
    assert out["breakdown"]["prefill"]["kernels_s"] > 0


def test_infer_output_is_bit_identical_across_runs():
    args = ("infer", "--model", "mixtral-8x7b", "--gpu", "h100-sxm", "--tp", "2", "--json")
    assert run(*args).stdout == run(*args).stdout


def test_infer_prints_a_table():
    res = run("infer", "--model", "gpt2", "--gpu", "t4", "--dtype", "fp16",
              "--prompt-tokens", "256", "--output-tokens", "32")
    assert res.exit_code == 0, res.output
    assert "TTFT" in res.stdout and "Where the time goes" in res.stdout


@pytest.mark.parametrize("name", _one_per_architecture())
def test_every_catalog_architecture_forecasts(name):
    res = run("infer", "--model", name, "--cluster", "dgx-h200", "--tp", "8", "--dtype", "fp8",
              "--prompt-tokens", "128", "--output-tokens", "16", "--json")
    if res.exit_code == 2:  # tp 8 must divide the heads; retry on one GPU
        res = run("infer", "--model", name, "--gpu", "h200-sxm", "--dtype", "fp8",
                  "--prompt-tokens", "128", "--output-tokens", "16", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["ttft_s"] > 0 and out["e2e_s"] >= out["ttft_s"]


def test_model_config_flag(tmp_path):
    from importlib import resources

    src = resources.files("perfcast.specs") / "data/models/qwen3-32b/config.json"
    path = tmp_path / "config.json"
    path.write_text(src.read_text())
    res = run("infer", "--model-config", str(path), "--gpu", "h100-sxm", "--json")
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("args,field", [
    (("--model", "lama-2-7b", "--gpu", "h100-sxm"),
     "model: unknown model 'lama-2-7b'; did you mean"),
    (("--model", "llama-2-7b", "--gpu", "h100x"), "gpu: unknown gpu"),
    (("--model", "llama-2-7b", "--gpu", "h100-sxm", "--tp", "3"), "tp: 3 does not divide"),
    (("--model", "llama-2-70b", "--gpu", "a100-sxm4-80gb"), "memory: needs"),
    (("--model", "llama-2-7b", "--gpu", "h100-sxm", "--prompt-tokens", "-5"), "prompt_tokens"),
    (("--model", "llama-2-7b", "--gpu", "v100-sxm2-32gb"),
     "dtype: v100-sxm2-32gb has no bf16 peak"),
    (("--model", "llama-2-7b", "--gpu", "a100-sxm4-80gb", "--dtype", "fp8"),
     "a100-sxm4-80gb has no fp8"),
    (("--model", "llama-2-7b", "--gpu", "h100-sxm", "--kv-dtype", "fp9"),
     "kv_dtype: unknown dtype"),
    (("--model", "llama-2-7b", "--gpu", "h100-sxm", "--host", "trt"), "host"),
    (("--model", "llama-2-7b"), "give exactly one of --gpu or --cluster"),
    (("--gpu", "h100-sxm"), "give exactly one of --model or --model-config"),
    (("--model", "llama-2-7b", "--gpu", "h100-sxm", "--dtype", "fp8", "--weight-dtype", "int4"),
     "fp8 activations need fp8 weights"),
])
def test_bad_input_is_one_line_and_exit_2(args, field):
    res = run("infer", *args)
    assert res.exit_code == 2
    assert field in res.stderr
    assert "Traceback" not in res.output and len(res.stderr.strip().splitlines()) == 1


def test_hardware_list_and_show():
    res = run("hardware", "list")
    assert res.exit_code == 0 and "h100-sxm" in res.stdout and "dgx-h100" in res.stdout
    shown = json.loads(run("hardware", "show", "H100-SXM5-80GB", "--json").stdout)
    assert shown["name"] == "h100-sxm" and "gpus.csv" in shown["sources"]["hbm_bandwidth_bps"]
    assert run("hardware", "show", "dgx-a100").exit_code == 0
    assert run("hardware", "show", "h1000").exit_code == 2


def test_models_lists_catalog():
    out = json.loads(run("models", "--json").stdout)
    names = {m["name"] for m in out["models"]}
    assert {"llama-2-7b", "deepseek-v3", "gpt3-175b"} <= names


def test_validate_kernels_json_rows(tmp_path):
    res = run("validate", "kernels", "--split", "neusight", "--train-rows", "60",
              "--test-rows", "40", "--no-learned", "--json", "--out", str(tmp_path / "report"))
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    keys = {"split", "device", "group", "method", "mape", "p90_ape", "n", "coverage_90",
            "extrapolated"}
    assert out["rows"] and all(set(r) == keys for r in out["rows"])
    assert {r["method"] for r in out["rows"]} == {"roofline", "cross_generation",
                                                   "target_measured"}
    assert (tmp_path / "report" / "kernels.md").exists()
    assert (tmp_path / "report" / "kernels.csv").exists()


def test_validate_rejects_unknown_split():
    res = run("validate", "kernels", "--split", "blackwell")
    assert res.exit_code == 2 and "split: unknown split 'blackwell'" in res.stderr


def test_infer_reports_kernel_tier():
    out = json.loads(run("infer", "--model", "llama-2-7b", "--gpu", "mi300x", "--json").stdout)
    assert out["inputs"]["kernel_model"]["tier"] == "cross_generation"
    out = json.loads(run("infer", "--model", "llama-2-7b", "--gpu", "h100-sxm", "--json").stdout)
    assert out["inputs"]["kernel_model"]["tier"] == "target_measured"
    roof = json.loads(run("infer", "--model", "llama-2-7b", "--gpu", "h100-sxm", "--kernel-model",
                          "roofline", "--json").stdout)
    assert roof["tpot_s"] < out["tpot_s"]  # fitted kernels never beat the roofline
