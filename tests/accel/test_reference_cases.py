"""Timeloop's own outputs for the tutorial's fixed mappings
(../shared/data/accelerator/timeloop_reference_cases.csv), reproduced by the reuse analysis.

Exact: MACs, cycles, utilisation and every access count the CSV gives. Energy: the per-access
energies come from the CSV itself (regfile 0.42564 pJ, MAC 0.845 pJ, DRAM 64 pJ/word; the
64-bit SRAM's 43.35 pJ read / 30.88 pJ update = exercise 01's per-scalar energies x words per
access), and the two leak rates are derived from exercises 00 and 01 (see the preset YAMLs),
so 00 and 01 are fits; 02 and 03 (four fJ/MAC figures) are independent checks, to the CSV's
rounding of the per-scalar energies (rel 5e-5)."""

import pytest

from perfcast.accel import Mapping, Problem, evaluate_mapping, get_arch

CONV1D = Problem(name="conv1d", dims={"R": 3, "P": 16})
CONV1D_OC = Problem(name="conv1d+oc", dims={"K": 32, "R": 3, "P": 16})
CONV1D_OC_IC = Problem(name="conv1d+oc+ic", dims={"C": 32, "K": 32, "R": 3, "P": 16})


def _run(arch_name, problem, entries):
    arch = get_arch(arch_name)
    return evaluate_mapping(arch, problem, Mapping.from_timeloop(arch, entries))


def _fj_per_mac(res):
    return res.energy_per_mac_j * 1e15


def test_00_one_level():
    res = _run("tutorial-1level", CONV1D,
               [{"target": "Buffer", "factors": "R=3 P=16", "permutation": "RP"}])
    assert (res.macs, res.cycles, res.utilization) == (48, 48, 1.0)
    buf = res.accesses["Buffer"]
    assert buf["Weights"] == {"reads": 48, "writes": 0, "updates": 0}
    assert buf["Inputs"] == {"reads": 48, "writes": 0, "updates": 0}
    # read-modify-write rule: the first update of each of the 16 outputs needs no read
    assert buf["Outputs"] == {"reads": 32, "writes": 0, "updates": 48}
    dynamic = (176 * 0.42564 + 48 * 0.845) / 48 * 1e3
    assert _fj_per_mac(res) - res.energy_breakdown["Buffer.leak"] / 48 * 1e15 == \
        pytest.approx(dynamic, rel=1e-9)
    assert _fj_per_mac(res) == pytest.approx(2406.54, rel=1e-6)


@pytest.mark.parametrize("main_factors", ["R=1 P=1", "P=16"])  # os and ws: identical counts
def test_01_two_level(main_factors):
    inner = "R=3 P=16" if main_factors == "R=1 P=1" else "R=3"
    res = _run("tutorial-2level", CONV1D, [
        {"target": "MainMemory", "factors": main_factors, "permutation": "PR"},
        {"target": "Buffer", "factors": inner, "permutation": "RP"}])
    main = res.accesses["MainMemory"]
    assert (main["Weights"]["reads"], main["Inputs"]["reads"]) == (3, 18)
    assert main["Outputs"] == {"reads": 0, "writes": 0, "updates": 16}
    assert res.accesses["Buffer"]["Inputs"]["writes"] == 18
    assert _fj_per_mac(res) == pytest.approx(7500.08, rel=1e-6)


@pytest.mark.parametrize("main_k,buf_k,input_reads,fj", [(32, 1, 576, 6258.20),
                                                         (16, 2, 288, 5162.30)])
def test_02_two_level_tiling(main_k, buf_k, input_reads, fj):
    res = _run("tutorial-2level", CONV1D_OC, [
        {"target": "MainMemory", "factors": f"R1 P16 K{main_k}", "permutation": "PRK"},
        {"target": "Buffer", "factors": f"R3 P1 K{buf_k}", "permutation": "RPK"}])
    assert (res.macs, res.cycles) == (1536, 1536)
    assert res.accesses["MainMemory"]["Inputs"]["reads"] == input_reads
    assert _fj_per_mac(res) == pytest.approx(fj, rel=5e-5)


_EX03 = [{"target": "MainMemory", "factors": "R1 P1 K1", "permutation": "PRK"},
         {"target": "GlobalBuffer", "factors": "R1 P16 K16", "permutation": "PRK"},
         {"target": "RegisterFile", "factors": "R3 P1 K2", "permutation": "RPK"}]
_BYPASS = [{"target": "GlobalBuffer", "type": "bypass", "keep": ["Weights", "Inputs"]},
           {"target": "RegisterFile", "type": "bypass", "keep": ["Outputs"]}]


@pytest.mark.parametrize("bypass,fj", [(False, 32130.51), (True, 39369.71)])
def test_03_three_level_bypass(bypass, fj):
    res = _run("tutorial-3level", CONV1D_OC, _EX03 + (_BYPASS if bypass else []))
    dram_j = sum(v for k, v in res.energy_breakdown.items() if k.startswith("MainMemory."))
    # DRAM: 96 + 18 + 512 words in 3 + 1 + 16 256-bit accesses of 2048 pJ
    assert dram_j / res.macs * 1e15 == pytest.approx(26666.67, rel=1e-6)
    assert res.accesses["MainMemory"]["Outputs"] == {"reads": 0, "writes": 0, "updates": 512}
    assert _fj_per_mac(res) == pytest.approx(fj, rel=5e-5)


@pytest.mark.parametrize("glb,spatial", [("R=3 P=1 K=32 C=2", "C=16"),
                                         ("R=3 P=1 K=2 C=32", "K=16")])
def test_04_spatial_cycles(glb, spatial):
    res = _run("tutorial-3level-spatial", CONV1D_OC_IC, [
        {"target": "MainMemory", "factors": "R=1 P=1 K=1 C=1", "permutation": "PRKC"},
        {"target": "GlobalBuffer", "factors": glb, "permutation": "PRKC"},
        {"target": "GlobalBuffer", "type": "spatial", "factors": spatial},
        {"target": "RegisterFile", "factors": "R=1 P=16 K=1 C=1", "permutation": "RPKC"}])
    assert (res.macs, res.cycles, res.utilization) == (49152, 3072, 1.0)
    assert res.accesses["RegisterFile"]["Weights"]["writes"] == 32 * 32 * 3  # weight-stationary


def test_05_null_mapping_everything_from_dram():
    # every loop at DRAM, GlobalBuffer and RegisterFile bypass everything: 1536 + 1536 reads,
    # 1024 output reads and 1536 updates at 64 pJ/word, + MAC energy + the two leaks
    res = _run("tutorial-3level", CONV1D_OC, [
        {"target": "MainMemory", "factors": "K32 R3 P16", "permutation": "RPK"},
        {"target": "GlobalBuffer", "type": "bypass", "keep": []},
        {"target": "RegisterFile", "type": "bypass", "keep": []}])
    assert res.accesses["MainMemory"]["Outputs"] == {"reads": 1024, "writes": 0, "updates": 1536}
    assert _fj_per_mac(res) == pytest.approx(235520.50, rel=2e-6)


def test_05_mapper_beats_the_baked_hand_mapping():
    from perfcast.accel import search_mapping

    arch = get_arch("tutorial-3level")
    fixed = search_mapping(arch, CONV1D_OC, "energy", seed=0)
    assert _fj_per_mac(fixed) < 32130.51  # Timeloop's "baked" (= exercise 03) mapping
    free = search_mapping(arch, CONV1D_OC, "energy", seed=0, bypass=True)
    assert _fj_per_mac(free) <= _fj_per_mac(fixed)
    # Timeloop's own mapper with free bypass reported 30263.99 fJ/MAC; ours goes lower
    assert _fj_per_mac(free) < 30263.99
