"""Software-stack profiles: how much of perfcast's calibrated kernel speed a training stack
reaches.

perfcast's kernel model is calibrated on kernel benchmarks (cuBLAS/CUTLASS GEMMs,
TensorRT-LLM's Hopper attention). A training stack built on other kernels reaches less:
MosaicML's llm-foundry of 2023 (eager PyTorch, FSDP, triton or flash attention of the time,
before Hopper-specific attention kernels) runs attention on H100 at about 1/2.6 of the
calibrated speed, on A100 at about 1/1.3. A profile scales two kernel classes per GPU
architecture, `other` (GEMMs, norms, activations, optimizer) and `attention`, fitted on that
stack's measured runs (perfcast.validate, `validate training`: held out by model and by GPU
generation); collectives are left as the comm layer prices them.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.kernels import ExecutionTimeModel
from perfcast.specs import Device

__all__ = ["ATTENTION_FAMILIES", "STACKS", "StackScaled", "load_stack", "stack_time_model"]

ATTENTION_FAMILIES = ("attn_prefill", "attn_decode")
STACKS = {"none": None, "llm-foundry": "stack_llm_foundry.json"}


class StackScaled:
    """An ExecutionTimeModel: `base`'s kernel times x `attention` for attention kernels and
    x `other` for every other kernel (collective rows stay as `base` prices them: 0)."""

    def __init__(self, base: ExecutionTimeModel, attention: float = 1.0, other: float = 1.0):
        if not (attention >= 0 and other >= 0):
            raise InputError("factors", f"attention={attention}, other={other}", ">= 0")
        self.base, self.attention, self.other = base, float(attention), float(other)

    def kernel_times(self, ops: pd.DataFrame, device) -> np.ndarray:
        times = np.asarray(self.base.kernel_times(ops, device), dtype=float)
        attn = ops["family"].isin(ATTENTION_FAMILIES).to_numpy()
        return times * np.where(attn, self.attention, self.other)


@cache
def load_stack(stack: str) -> dict:
    """A profile's shipped document: factors per fitted GPU, provenance, held-out errors."""
    if STACKS.get(stack) is None:
        raise InputError("stack", f"no profile {stack!r}", [s for s in STACKS if STACKS[s]])
    path = resources.files("perfcast.train") / "data" / STACKS[stack]
    return json.loads(path.read_text())


def stack_time_model(stack: str, device: Device, base: ExecutionTimeModel
                     ) -> ExecutionTimeModel:
    """`base` as `stack` runs it on `device`: 'none' is `base` itself; a profile applies the
    factors fitted on GPUs of the device's architecture (A100 -> Ampere, H100 -> Hopper)."""
    if stack not in STACKS:
        raise InputError("stack", f"unknown stack {stack!r}", list(STACKS))
    if STACKS[stack] is None:
        return base
    doc = load_stack(stack)
    by_arch = {f["arch"]: f for f in doc["factors"].values()}
    if device.arch not in by_arch:
        raise InputError("stack", f"{stack} has no factors for {device.name} "
                         f"({device.arch})", [f"a GPU of architecture {a}" for a in by_arch]
                         + ["--stack none"])
    f = by_arch[device.arch]
    return StackScaled(base, attention=f["attention"], other=f["other"])
