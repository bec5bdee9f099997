"""Software-stack profiles: how much of perfcast's calibrated kernel speed a training stack
reaches, and how well it hides its collectives.

perfcast's kernel model is calibrated on kernel benchmarks (cuBLAS/CUTLASS GEMMs,
TensorRT-LLM's Hopper attention). A training stack built on other kernels reaches less.
A profile (schema 2) holds three numbers fitted on the stack's measured runs across GPU
generations at once (perfcast.validate, `validate training`, scored held out by model and
by generation): `other` scales GEMMs, norms, activations and the optimizer; `attention`
scales attention kernels on the architecture the stack's attention kernels were written for
(`attention_kernel_arch`); `overlap_loss` prices the collectives it hides poorly
(perfcast.train.CommOverlap). On a newer architecture such kernels cannot use its new
tensor-core instructions: FlashAttention-2, written for Ampere, reaches up to 73% of A100's
peak (Dao 2023, arXiv:2307.08691) but 35% of H100's (Shah et al. 2024, FlashAttention-3,
arXiv:2407.08608), so its attention there takes 0.73 / 0.35 of its native share of the
calibrated time (LEGACY_ATTENTION). Schema 1 profiles (factors per architecture) still load.
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
from perfcast.train._overlap import CommOverlap

__all__ = ["ATTENTION_FAMILIES", "LEGACY_ATTENTION", "STACKS", "StackScaled",
           "attention_penalty", "load_stack", "stack_overlap", "stack_time_model"]

ATTENTION_FAMILIES = ("attn_prefill", "attn_decode")
STACKS = {"none": None, "llm-foundry": "stack_llm_foundry.json"}
# (device architecture, kernels' architecture) -> attention time x (module docstring)
LEGACY_ATTENTION = {("Hopper", "Ampere"): 0.73 / 0.35}


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


def attention_penalty(device_arch: str, kernel_arch: str) -> float | None:
    """Attention time on `device_arch` of kernels written for `kernel_arch`, per unit of
    their native share (1 on their own architecture; None where no source says)."""
    if device_arch == kernel_arch:
        return 1.0
    return LEGACY_ATTENTION.get((device_arch, kernel_arch))


def _factors(stack: str, doc: dict, device: Device) -> tuple[float, float]:
    """(other, attention) of a profile on `device`, or an InputError naming the GPUs it
    has factors for."""
    if doc.get("schema", 1) == 1:  # per-architecture factors
        by_arch = {f["arch"]: (f["other"], f["attention"]) for f in doc["factors"].values()}
        archs = list(by_arch)
        found = by_arch.get(device.arch)
    else:
        kernel_arch = doc["attention_kernel_arch"]
        archs = [kernel_arch] + [d for d, k in LEGACY_ATTENTION if k == kernel_arch]
        penalty = attention_penalty(device.arch, kernel_arch)
        f = doc["factors"]
        found = None if penalty is None else (f["other"], f["attention"] * penalty)
    if found is None:
        raise InputError("stack", f"{stack} has no factors for {device.name} "
                         f"({device.arch})", [f"a GPU of architecture {a}" for a in archs]
                         + ["--stack none"])
    return found


def stack_time_model(stack: str, device: Device, base: ExecutionTimeModel
                     ) -> ExecutionTimeModel:
    """`base` as `stack` runs it on `device`: 'none' is `base` itself; a profile scales
    attention and other kernels (module docstring)."""
    if stack not in STACKS:
        raise InputError("stack", f"unknown stack {stack!r}", list(STACKS))
    if STACKS[stack] is None:
        return base
    other, attention = _factors(stack, load_stack(stack), device)
    return StackScaled(base, attention=attention, other=other)


def stack_overlap(stack: str) -> CommOverlap:
    """What hiding collectives costs under `stack`: its fitted overlap loss (schema 2
    profiles), else SM contention alone."""
    if STACKS.get(stack) is None:
        if stack not in STACKS:
            raise InputError("stack", f"unknown stack {stack!r}", list(STACKS))
        return CommOverlap()
    doc = load_stack(stack)
    if doc.get("schema", 1) == 1:
        return CommOverlap()
    return CommOverlap(overlap_loss=doc["factors"]["overlap_loss"],
                       provenance=f"{stack}: overlap loss fitted on its measured runs "
                                  f"({doc['fit']})")
