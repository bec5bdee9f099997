"""The memory a process can allocate on a GPU (perfcast.specs.cuda_total_bytes): one number,
with its source, that every fit check reads — never the marketed decimal capacity where a
device-reported total is shipped."""

import json
from importlib import resources

import pytest

from perfcast.specs import (
    cuda_total_bytes,
    device_names,
    get_device,
    physical_memory_bytes,
)

GPUS = [n for n in device_names() if get_device(n).kind == "gpu"]


def _table() -> dict:
    return json.loads((resources.files("perfcast.specs") / "data" / "gpu_memory.json")
                      .read_text())


@pytest.mark.parametrize("name", GPUS)
def test_total_is_sourced_and_bounded_by_physical(name):
    device = get_device(name)
    total, source = cuda_total_bytes(device)
    assert source
    assert 0 < total <= physical_memory_bytes(device)


def test_every_shipped_total_names_a_catalog_gpu_and_beats_its_label():
    """A device-reported total is GiB-sized: above the decimal label (ECC parts: about it)."""
    for name in _table()["devices"]:
        device = get_device(name)
        total, _ = cuda_total_bytes(device)
        assert 0.95 * device.hbm_capacity_bytes < total < physical_memory_bytes(device)


@pytest.mark.parametrize(("name", "low_gb", "high_gb"), [
    ("b200-sxm", 192.0, 194.0),  # AIConfigurator: 180 GiB (193.3e9 B); label 180 GB
    ("gb200", 198.0, 199.0),  # nvidia-smi 189,471 MiB
    ("b300-sxm", 287.0, 289.0),  # nvidia-smi 275,040 MiB
    ("h200-sxm", 150.0, 151.0),  # nvidia-smi 143,771 MiB; label 141 GB
    ("a100-sxm4-80gb", 85.0, 86.0),  # nvidia-smi 81,920 MiB; label 80 GB
])
def test_device_reported_totals_replace_decimal_labels(name, low_gb, high_gb):
    total, source = cuda_total_bytes(get_device(name))
    assert low_gb * 1e9 < total < high_gb * 1e9
    assert "catalog capacity" not in source


def test_a_gpu_without_a_published_total_keeps_its_label_and_says_so():
    device = get_device("mi300x")
    total, source = cuda_total_bytes(device)
    assert total == device.hbm_capacity_bytes
    assert source.startswith("catalog capacity")
