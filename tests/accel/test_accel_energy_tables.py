"""Default energy tables (65/45/40 nm) and an arch spec that takes its energies from one:
the 45 nm set reproduces Horowitz ISSCC 2014's figures, orders DRAM > SRAM > register file and
prices the eyeriss-like hierarchy end to end."""

import math

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from perfcast.accel import (
    evaluate_mapping,
    get_arch,
    load_arch_yaml,
    model_problems,
    search_mapping,
)
from perfcast.accel._energy import access_energy_pj, mac_energy_pj, technology_names
from perfcast.errors import InputError


def test_three_technologies_ship():
    assert technology_names() == ["40nm", "45nm", "65nm"]


def test_45nm_mac_scales_as_horowitz_int_figures():
    # 8-bit: mult 0.2 + add 0.03; 16/32-bit: mult x (b/8)^2, add x b/8
    assert mac_energy_pj("45nm", 8) == pytest.approx(0.23)
    assert mac_energy_pj("45nm", 16) == pytest.approx(0.2 * 4 + 0.03 * 2)
    assert mac_energy_pj("45nm", 32) == pytest.approx(0.2 * 16 + 0.03 * 4)
    # Horowitz's own 32-bit int mult 3.1 pJ + add 0.1 pJ: within 7%
    assert mac_energy_pj("45nm", 32) == pytest.approx(3.2, rel=0.07)


def test_45nm_sram_hits_the_published_points_and_interpolates():
    for size, pj in ((8192, 10.0), (32768, 20.0), (1 << 20, 100.0)):
        assert access_energy_pj("45nm", "sram", size, 64, "read") == pytest.approx(pj)
    # 128 KiB: log-log between 32 KB (20 pJ) and 1 MB (100 pJ)
    slope = math.log(5) / math.log(32)
    assert access_energy_pj("45nm", "sram", 131072, 64, "read") == \
        pytest.approx(20 * 4 ** slope)
    assert access_energy_pj("45nm", "sram", 131072, 8, "read") == \
        pytest.approx(20 * 4 ** slope / 8)  # energy per bit moved
    assert access_energy_pj("45nm", "dram", None, 64, "write") == 1950.0


@given(a=st.integers(64, 1 << 24), b=st.integers(64, 1 << 24))
def test_sram_energy_grows_with_capacity(a, b):
    for tech in technology_names():
        ea = access_energy_pj(tech, "sram", min(a, b), 64, "read")
        eb = access_energy_pj(tech, "sram", max(a, b), 64, "read")
        assert ea <= eb


def test_45nm_preset_takes_every_energy_from_the_table_and_orders_levels():
    arch = get_arch("eyeriss-like-45nm")
    assert arch.technology == "45nm" and arch.num_pes == 168
    assert arch.mac_energy_pj == pytest.approx(0.23)
    per_word = {lvl.name: lvl.read_energy_pj / lvl.block_words for lvl in arch.levels}
    assert per_word["DRAM"] == pytest.approx(1950 / 8)
    assert per_word["DRAM"] > per_word["shared_glb"] > per_word["ifmap_spad"]
    assert per_word["ifmap_spad"] == per_word["psum_spad"] == pytest.approx(0.23)


def test_yaml_overrides_win_and_unknown_technology_is_named(tmp_path):
    spec = get_arch("eyeriss-like-45nm").model_dump()
    for lvl in spec["levels"]:
        lvl.pop("read_energy_pj")
        lvl.pop("write_energy_pj")
    spec.pop("mac_energy_pj")
    spec["levels"][1]["read_energy_pj"] = 99.0
    spec["word_bits"] = 16
    path = tmp_path / "a.yaml"
    path.write_text(yaml.safe_dump(spec))
    arch = load_arch_yaml(path)
    glb = arch.levels[1]
    assert glb.read_energy_pj == 99.0  # given: kept
    # not given: the table's, at 16-bit words (8 words x 16 bits = 128-bit accesses)
    assert glb.write_energy_pj == pytest.approx(
        access_energy_pj("45nm", "sram", 131072 * 2, 128, "write"))
    assert arch.mac_energy_pj == pytest.approx(mac_energy_pj("45nm", 16))
    spec["technology"] = "45mn"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(InputError, match=r"technology.*allowed: 40nm, 45nm, 65nm"):
        load_arch_yaml(path)


def test_same_mapping_on_65nm_and_45nm_differs_only_in_energy():
    problem = model_problems("resnet50", layer="layer2.0.conv2")[0]
    a65, a45 = get_arch("eyeriss-like"), get_arch("eyeriss-like-45nm")
    r65 = search_mapping(a65, problem, "energy", max_samples=300)
    r45 = evaluate_mapping(a45, problem, r65.mapping)
    assert r45.accesses == r65.accesses and r45.cycles == r65.cycles
    dram = sum(v for k, v in r45.energy_breakdown.items() if k.startswith("DRAM."))
    dram65 = sum(v for k, v in r65.energy_breakdown.items() if k.startswith("DRAM."))
    assert dram == pytest.approx(dram65 * 1950 / 512)
    assert r45.energy_breakdown["mac"] == pytest.approx(problem.macs * 0.23e-12)
    assert 0.23e-12 < r45.energy_per_mac_j < 1950e-12 / 8


def test_memory_class_is_inferred_or_named_and_checked():
    spec = {"name": "x", "technology": "45nm", "clock_hz": 1e9, "levels": [
        {"name": "DRAM"}, {"name": "buf", "capacity_words": 64},
        {"name": "big", "capacity_words": 64, "memory": "sram"}]}
    from perfcast.accel import ArchSpec

    arch = ArchSpec.model_validate(spec)
    dram, buf, big = arch.levels
    assert dram.read_energy_pj == 1950 / 8  # one 8-bit word of a 64-bit access's energy
    assert buf.read_energy_pj == pytest.approx(0.23)  # 64 bytes: a register file
    assert big.read_energy_pj == pytest.approx(10 * (64 / 8192) ** 0.5 / 8)  # sram, sqrt
    spec["levels"][1]["memory"] = "flash"
    with pytest.raises(ValueError, match="unknown memory 'flash'.*dram, sram, regfile"):
        ArchSpec.model_validate(spec)
