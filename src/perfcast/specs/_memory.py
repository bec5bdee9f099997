"""How much memory a process can allocate on one GPU: the one number every "does it fit"
check uses (serving's KV planner, inference, RAG and diffusion fit checks, training's
memory budget).

Vendors quote binary GiB as "GB" (nvidia-smi: an "A100 80GB" has 81,920 MiB, exactly
80 GiB; an "H100 80GB" 81,559 MiB, github.com/modal-labs/modal-client/pull/2797), so the
catalog's decimal bytes read in GiB bound the physical memory from above. What the CUDA
allocator can get is the total cudaMemGetInfo reports (torch.cuda.mem_get_info()[1], what
vLLM's `gpu_memory_utilization` and SGLang's `mem_fraction_static` are fractions of), a
little below nvidia-smi's total: data/gpu_memory.json, per device with its source. A device
without a published total keeps its catalog capacity in decimal bytes (below what a
GiB-sized part has, so a plan that fits there fits on the real part).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from perfcast.specs._device import Device

__all__ = ["cuda_total_bytes", "physical_memory_bytes"]

GIB_PER_GB = 2**30 / 1e9  # a marketed "GB" of device memory is a GiB (module docstring)
MIB = 2**20


@cache
def _gpu_memory() -> dict:
    """The shipped CUDA-visible totals (data/gpu_memory.json)."""
    path = resources.files("perfcast.specs") / "data" / "gpu_memory.json"
    return json.loads(path.read_text())


def physical_memory_bytes(device: Device) -> float:
    """An upper bound on the device's memory: its catalog capacity read in GiB (vendors
    quote GiB as GB; parts with ECC or reserved pages show less, never more)."""
    return device.hbm_capacity_bytes * GIB_PER_GB


def cuda_total_bytes(device: Device) -> tuple[float, str]:
    """(bytes the CUDA allocator can get on `device`, where that number comes from): the
    shipped CUDA total, else nvidia-smi's total less the measured NVML-to-CUDA gap, else
    the catalog capacity in decimal bytes (below what GiB-sized parts have)."""
    table = _gpu_memory()
    row = table["devices"].get(device.name)
    if row is None:
        return device.hbm_capacity_bytes, "catalog capacity (no measured CUDA total)"
    if "cuda_total_bytes" in row:
        return float(row["cuda_total_bytes"]), row["source"]
    return (row["nvml_total_mib"] * MIB - table["nvml_to_cuda_gap_bytes"],
            f"{row['source']}, less the NVML-to-CUDA gap ({table['nvml_to_cuda_gap_source']})")
