"""Shipped kernel sources (perfcast.kernels.KERNEL_SOURCES): each names a store and a
calibration fitted on it; `shipped_calibration(source)` and `calibration_devices(source)`
read them without touching a parquet file."""

from importlib import resources

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfcast.errors import InputError
from perfcast.kernels import (
    KERNEL_SOURCES,
    calibration_devices,
    kernel_source,
    shipped_calibration,
)

FRAMEWORKS = ("vllm", "sglang")
MAX_FILE_BYTES = 7_000_000  # 6.3 MB since issue 20 added the linear_attn family


def test_default_source_is_todays_calibration():
    assert shipped_calibration() is shipped_calibration("default")
    assert "devices_by_family" not in shipped_calibration().provenance  # file unchanged


@given(st.text(max_size=12).filter(lambda s: s not in KERNEL_SOURCES))
def test_unknown_source_lists_the_names(name):
    with pytest.raises(InputError) as err:
        shipped_calibration(name)
    assert all(s in str(err.value) for s in KERNEL_SOURCES)
    with pytest.raises(InputError):
        kernel_source(name)


@pytest.mark.parametrize("source", FRAMEWORKS)
def test_framework_calibration_is_small_and_fitted(source):
    spec = KERNEL_SOURCES[source]
    path = resources.files("perfcast.kernels") / "data" / spec.calibration_file
    assert len(path.read_bytes()) < MAX_FILE_BYTES
    cal = shipped_calibration(source)
    assert {"gemm", "attn_prefill", "attn_decode", "moe"} <= set(cal.families)
    assert cal.provenance["kernel_source"] == source
    assert cal.provenance["sources"] == [f"aiconfigurator-{source}"]


@pytest.mark.parametrize("source", ["default", *FRAMEWORKS])
def test_calibration_devices_are_the_corrected_devices(source):
    """Per family, sorted devices; each holds its own corrections for that family."""
    cal = shipped_calibration(source)
    devices = calibration_devices(source)
    assert devices["gemm"] and devices["attn_decode"]
    for family, names in devices.items():
        assert list(names) == sorted(names)
        for name in names:
            assert any(k.split("/")[0] == family for k in cal.devices[name]), (family, name)


def test_framework_kernels_are_fixed_cost_variants():
    """Attention kernels of one framework are told apart (FA3 vs flashinfer vs triton)."""
    fixed = shipped_calibration("sglang").families["attn_prefill"].fixed_s
    names = {k.split("/")[0] for k in fixed if "/" in k}
    assert {"fa3", "flashinfer", "triton"} <= names
