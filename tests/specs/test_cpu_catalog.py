"""The CPU targets of specs/data/cpus.json: valid, sourced, peaks that follow from their fields."""

import json
import math
from importlib import resources

import pytest

from perfcast.errors import InputError
from perfcast.specs import DType, device_names, get_device
from perfcast.specs._catalog import CpuCores, _cpu_entry, cpu_cores

CPUS = ["epyc-9654", "cortex-a76-rpi5", "cortex-a78-sd888", "apple-m2-pcores"]
BITS = {DType.FP32: 32, DType.FP16: 16, DType.BF16: 16}


def _raw_entries() -> list[dict]:
    text = (resources.files("perfcast.specs") / "data" / "cpus.json").read_text()
    return json.loads(text)["devices"]


def test_cpu_targets_listed_beside_the_gpus():
    names = device_names()
    assert set(CPUS) <= set(names)
    assert "h100-sxm" in names


@pytest.mark.parametrize("name", CPUS)
def test_cpu_validates_and_every_number_has_a_source(name):
    device = get_device(name)
    assert device.kind == "cpu"
    assert device.boost_clock_hz and device.l2_bytes
    fields = device.model_dump(exclude_none=True, exclude={"sources", "kind", "name"})
    for key, value in fields.items():
        if key == "dense_peak_flops":
            for dtype in value:
                assert device.sources.get(f"dense_peak_flops.{dtype}", "").startswith("derived")
        elif key != "matrix_peak_flops":
            assert device.sources.get(key), f"{name}.{key} has no source"
    assert set(cpu_cores(name).sources) == {"simd_bits", "fma_units"}


@pytest.mark.parametrize("name", CPUS)
def test_peak_is_cores_clock_lanes_fma_times_two(name):
    device, cores = get_device(name), cpu_cores(name)
    for dtype, flops in device.dense_peak_flops.items():
        lanes = cores.simd_bits // BITS[dtype]
        expected = device.sm_count * device.boost_clock_hz * lanes * cores.fma_units * 2
        assert flops == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("name", "fp32_gflops"), [
    ("epyc-9654", 96 * 3.55 * 32), ("cortex-a76-rpi5", 4 * 2.4 * 16),
    ("cortex-a78-sd888", 3 * 2.42 * 16), ("apple-m2-pcores", 4 * 3.49 * 32)])
def test_fp32_peak_matches_published_flops_per_cycle(name, fp32_gflops):
    # Zen 4 and Apple P-cores: 32 fp32 FLOP/cycle/core; Cortex-A76/A78: 16.
    assert get_device(name).peak_flops("fp32") == pytest.approx(fp32_gflops * 1e9)


@pytest.mark.parametrize(("name", "dtypes"), [
    ("epyc-9654", {"fp32", "bf16"}),  # AVX-512 BF16, no AVX-512 FP16 on Zen 4
    ("cortex-a76-rpi5", {"fp32", "fp16"}), ("cortex-a78-sd888", {"fp32", "fp16"}),  # v8.2 FP16
    ("apple-m2-pcores", {"fp32", "fp16", "bf16"})])  # Armv8.6-A: FEAT_BF16
def test_half_precision_peaks_where_the_isa_has_them(name, dtypes):
    device = get_device(name)
    assert {d.value for d in device.dense_peak_flops} == dtypes
    for half in dtypes - {"fp32"}:  # 16-bit lanes: twice the fp32 rate
        assert device.peak_flops(half) == pytest.approx(2 * device.peak_flops("fp32"))


def test_missing_half_precision_is_a_clear_error():
    with pytest.raises(InputError, match="cortex-a76-rpi5 has no bf16 peak.*fp32, fp16"):
        get_device("rpi5").peak_flops("bf16")


@pytest.mark.parametrize("entry", _raw_entries(), ids=lambda e: e["device"]["name"])
def test_every_source_says_vendor_derived_third_party_or_assumption(entry):
    kinds = ("vendor: ", "derived: ", "third-party: ", "assumption: ")
    for text in [*entry["device"]["sources"].values(), *entry["cores"]["sources"].values()]:
        assert text.startswith(kinds), text


def test_a_peak_that_disagrees_with_its_fields_is_refused():
    entry = json.loads(json.dumps(_raw_entries()[0]))
    entry["device"]["dense_peak_flops"]["fp32"] *= 2
    with pytest.raises(InputError, match="derived"):
        _cpu_entry(entry)


def test_core_spec_is_frozen_and_checked():
    cores = cpu_cores("epyc-9654")
    with pytest.raises(ValueError):
        cores.fma_units = 4
    with pytest.raises(ValueError):
        CpuCores(simd_bits=0, fma_units=2)


@pytest.mark.parametrize(("alias", "name"), [
    ("AMD EPYC 9654", "epyc-9654"), ("genoa", "epyc-9654"), ("Cortex-A76", "cortex-a76-rpi5"),
    ("raspberry_pi_5", "cortex-a76-rpi5"), ("cortex-a78", "cortex-a78-sd888"),
    ("M2", "apple-m2-pcores")])
def test_aliases_resolve(alias, name):
    assert get_device(alias).name == name


@pytest.mark.parametrize(("typo", "suggested"), [
    ("epyc-9564", "epyc-9654"), ("cortex-a67-rpi5", "cortex-a76-rpi5"),
    ("cortex-a87-sd888", "cortex-a78-sd888"), ("apple-m2-pcore", "apple-m2-pcores")])
def test_misspelt_cpu_suggests_the_close_match(typo, suggested):
    with pytest.raises(InputError) as err:
        get_device(typo)
    assert suggested in str(err.value)


def test_gpu_is_not_a_cpu_target():
    with pytest.raises(InputError, match="not a CPU target"):
        cpu_cores("h100-sxm")


def test_bandwidth_and_capacity_are_si_bytes():
    # Raspberry Pi 5: LPDDR4X-4267 x 32-bit bus; EPYC 9654: 12 x DDR5-4800 x 8 bytes
    assert get_device("rpi5").hbm_bandwidth_bps == pytest.approx(4267e6 * 4)
    assert get_device("genoa").hbm_bandwidth_bps == pytest.approx(12 * 4800e6 * 8)
    assert math.isclose(get_device("m2").hbm_capacity_bytes, 8e9)
