"""Scenario X6: ResNet-50 conv layers on an Eyeriss-like accelerator (168 PEs): cycles,
utilisation, energy breakdown per level, pJ/MAC. (The mapper's wall time is in
benchmarks/bench_accel.py.)"""

import pytest

from perfcast.accel import get_arch, map_layers, model_problems, model_totals


@pytest.fixture(scope="module")
def mapped():
    arch = get_arch("eyeriss-like")
    problems = [p for p in model_problems("resnet50") if p.name != "fc"]
    return arch, problems, map_layers(arch, problems, objective="edp", seed=0)


def _level(breakdown, level):
    return sum(v for k, v in breakdown.items() if k.split(".")[0] == level)


def test_every_conv_layer_is_mapped_validly(mapped):
    arch, problems, results = mapped
    assert len(results) == 53
    for p, r in zip(problems, results, strict=True):
        r.mapping.check(arch, p)
        assert r.fits and r.macs == p.macs and r.cycles * arch.num_pes >= r.macs
        assert 0 < r.utilization <= 1


def test_totals_and_breakdown_are_plausible(mapped):
    _, problems, results = mapped
    totals = model_totals(problems, results)
    assert totals["macs"] == 4_087_136_256
    e = totals["energy_breakdown"]
    shares = {lvl: _level(e, lvl) / totals["energy_j"] for lvl in
              ("DRAM", "shared_glb", "ifmap_spad", "weights_spad", "psum_spad", "mac")}
    assert sum(shares.values()) == pytest.approx(1.0)
    # Eyeriss' relative access costs RF : GLB : DRAM = 1 : 6 : 200 make DRAM a large share
    # even at high reuse, and the scratchpads (one access per MAC each) the bulk.
    assert 0.05 < shares["DRAM"] < 0.5
    assert shares["shared_glb"] < shares["DRAM"]
    rf = shares["ifmap_spad"] + shares["weights_spad"] + shares["psum_spad"]
    assert 0.3 < rf < 0.9
    # pJ/MAC between the MAC alone and every operand from DRAM
    assert 0.21e-12 < totals["energy_per_mac_j"] < 20e-12
    assert 0.3 < totals["utilization"] <= 1.0
