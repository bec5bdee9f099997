"""`perfcast hardware list` shows the CPU targets beside the GPUs; a CPU can be a --gpu target
and a misspelt device name suggests GPUs and CPUs alike."""

import json

import pytest
from typer.testing import CliRunner

from perfcast.cli import app

runner = CliRunner()


def test_hardware_list_has_a_kind_and_an_fp32_column():
    res = runner.invoke(app, ["hardware", "list"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:]]
            for line in res.stdout.splitlines() if line.startswith("│")}
    assert rows["epyc-9654"][0] == "CPU" and rows["h100-sxm"][0] == "GPU"
    # fp32 column: 96 x 3.55 GHz x 32 FLOP/cycle = 10.9 TFLOP/s; A76: 4 x 2.4 x 16 = 0.15
    assert rows["epyc-9654"][3] == "10.9" and rows["cortex-a76-rpi5"][3] == "0.15"
    assert rows["epyc-9654"][4] == "21.8"  # bf16: twice fp32


def test_hardware_list_json_splits_gpus_and_cpus():
    out = json.loads(runner.invoke(app, ["hardware", "list", "--json"]).stdout)
    assert {d["name"] for d in out["cpus"]} == {"epyc-9654", "cortex-a76-rpi5",
                                                 "cortex-a78-sd888", "apple-m2-pcores"}
    assert all(d["kind"] == "gpu" for d in out["gpus"]) and len(out["gpus"]) > 10


def test_infer_runs_on_a_cpu_target_in_bf16():
    res = runner.invoke(app, ["infer", "--model", "llama-2-7b", "--gpu", "epyc-9654", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    # decode is weight-bound: TPOT at least the 13.5 GB of bf16 weights over 460.8 GB/s
    assert out["tpot_s"] >= 13.4e9 / 460.8e9


@pytest.mark.parametrize(("name", "suggested"), [("epyc-9645", "epyc-9654"),
                                                 ("apple-m3", "apple-m2-pcores"),
                                                 ("h1OO", "h100-sxm")])
def test_near_miss_device_names_both_kinds(name, suggested):
    res = runner.invoke(app, ["infer", "--model", "llama-2-7b", "--gpu", name])
    assert res.exit_code == 2
    assert "unknown gpu or cpu device" in res.stderr and suggested in res.stderr
    assert "CPUs (epyc-9654" in res.stderr


def test_cpu_without_bf16_keeps_the_clear_error():
    res = runner.invoke(app, ["infer", "--model", "gpt2", "--gpu", "rpi5"])
    assert res.exit_code == 2
    assert "cortex-a76-rpi5 has no bf16 peak (allowed: fp32, fp16)" in res.stderr


@pytest.mark.parametrize("alias, name", [("DGX H100", "dgx-h100"), ("hgx-h200", "dgx-h200"),
                                         ("GB200 NVL72", "gb200-nvl72")])
def test_hardware_show_takes_cluster_aliases(alias, name):
    res = CliRunner().invoke(app, ["hardware", "show", alias, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["name"] == name


def test_hardware_show_lists_the_presets_of_an_ambiguous_cluster_alias():
    res = CliRunner().invoke(app, ["hardware", "show", "nvl72"])
    assert res.exit_code == 2
    assert "gb200-nvl72" in res.output and "gb300-nvl72" in res.output
