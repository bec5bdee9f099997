import json

import pytest
from typer.testing import CliRunner

from perfcast.cli import app

runner = CliRunner()
KEYS = {"cycles", "utilization", "energy_j", "energy_per_mac_j", "energy_breakdown", "mapping",
        "per_layer", "energy_by_level", "macs"}


def _run(*args):
    return runner.invoke(app, ["accel", *args])


def test_json_for_one_layer_has_the_keys_and_consistent_numbers():
    res = _run("--arch", "eyeriss-like", "--model", "resnet50", "--layer", "layer3.0.conv2",
               "--objective", "edp", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out) >= KEYS
    assert list(out["mapping"]) == ["layer3.0.conv2"]
    assert out["macs"] == 256 * 256 * 9 * 14 * 14
    assert sum(out["energy_breakdown"].values()) == pytest.approx(out["energy_j"])
    assert out["energy_per_mac_j"] == pytest.approx(out["energy_j"] / out["macs"])
    assert 0 < out["utilization"] <= 1
    assert len(out["mapping"]["layer3.0.conv2"]["levels"]) == 5


def test_table_output():
    res = _run("--model", "mobilenet", "--layer", "block2.dw", "--objective", "energy")
    assert res.exit_code == 0, res.output
    assert "pJ/MAC" in res.output


@pytest.mark.parametrize("flag,value,hint", [("--arch", "eyeriss-lik", "eyeriss-like"),
                                              ("--model", "resnet-50", "resnet50"),
                                              ("--layer", "conv_1", "conv1"),
                                              ("--objective", "edpp", "edp"),
                                              ("--dataflow", "ws", "stationary")])
def test_unknown_names_fail_with_close_matches(flag, value, hint):
    res = _run(flag, value)
    assert res.exit_code == 2
    assert "did you mean" in res.output and hint in res.output


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "breakdown.png"
    res = _run("--model", "resnet50", "--layer", "conv1", "--plot", str(path))
    assert res.exit_code == 0, res.output
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_free_bypass_never_costs_more_energy():
    args = ("--model", "resnet50", "--layer", "layer4.0.conv2", "--objective", "energy",
            "--json")
    fixed = json.loads(_run(*args).stdout)
    free = json.loads(_run(*args, "--free-bypass").stdout)
    assert free["free_bypass"] and free["energy_j"] <= fixed["energy_j"]


def test_a_layer_no_mapping_fits_fails_cleanly():
    res = _run("--arch", "tutorial-2level", "--model", "bert-base", "--layer", "attn_out")
    assert res.exit_code == 2 and "fits no mapping" in res.output


def test_45nm_preset_maps_a_layer_with_table_energies():
    res = _run("--arch", "eyeriss-like-45nm", "--model", "resnet50", "--layer", "conv1",
               "--objective", "energy", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["arch"] == "eyeriss-like-45nm"
    # MAC: Horowitz's 45 nm 8-bit mult + add = 0.23 pJ, once per MAC (no MAC leakage)
    assert out["energy_by_level"]["mac"] == pytest.approx(out["macs"] * 0.23e-12)
    assert out["energy_per_mac_j"] > 0.23e-12
    assert out["energy_by_level"]["DRAM"] > out["energy_by_level"]["shared_glb"]
