"""Kernel times of a software stack: each family priced from its stack's kernel source.

A stack (`perfcast.specs.Stack`) names, per kernel family, the measured tables it runs
(`kernel_sources`: vLLM's or SGLang's own kernel tables, else the shipped default
calibration) and which families it only borrows from another stack's kernels. The
`StackTimeModel` routes rows by family; `family_provenance` says, per family, whether the
forecast is measured on this device for this stack, fitted on other devices of the stack's
source (cross-generation), borrowed from another stack's kernels, or the roofline alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

import numpy as np
import pandas as pd

from perfcast.kernels._calibration import (
    FALLBACK,
    PhysicsModel,
    calibration_devices,
    default_time_model,
    shipped_calibration,
)
from perfcast.kernels._roofline import ExecutionTimeModel, RooflineModel, model_notes
from perfcast.specs import Device, Stack

__all__ = ["KERNEL_FAMILIES", "StackTimeModel", "family_provenance", "source_time_model",
           "stack_families", "stack_kernel_model"]

# Families a forecast prices with a kernel model (collectives go to the comm layer).
KERNEL_FAMILIES = ("gemm", "attn_prefill", "attn_decode", "moe", "norm", "activation",
                   "elementwise", "rope", "softmax", "embedding", "kv_write", "sampling",
                   "conv", "linear_attn")
DEFAULT_SOURCE = "default"


@cache
def source_time_model(source: str) -> PhysicsModel:
    """The calibrated model of one shipped kernel source (one instance per source, so its
    memoised prices are shared)."""
    if source == DEFAULT_SOURCE:
        return default_time_model()
    return PhysicsModel(shipped_calibration(source))


class StackTimeModel:
    """An ExecutionTimeModel: rows of each routed family priced by its route's model as the
    kernel the stack runs there (`kernels[family][arch]`, the op name in that source's
    tables; its ':' configuration kept), every other row by `default`."""

    def __init__(self, routes: Mapping[str, ExecutionTimeModel], default: ExecutionTimeModel,
                 kernels: Mapping[str, Mapping[str, str]] | None = None):
        self.routes, self.default = dict(routes), default
        self.kernels = {f: dict(k) for f, k in (kernels or {}).items()}

    def _as_kernel(self, part: pd.DataFrame, family: str, device: Device) -> pd.DataFrame:
        by_arch = self.kernels.get(family)
        if by_arch is None:
            return part
        name = by_arch.get(device.arch, by_arch["default"])
        ops = part["op"].to_numpy(dtype=object)
        return part.assign(op=[name + o[o.find(":"):] if ":" in o else name
                               for o in map(str, ops)])

    def kernel_times(self, ops: pd.DataFrame, device: Device) -> np.ndarray:
        """Each row priced once: by its family's route, else by `default`."""
        family = ops["family"].to_numpy(dtype=object)
        routed = np.isin(family, list(self.routes))
        if not routed.any():
            return np.asarray(self.default.kernel_times(ops, device), dtype=float)
        times = np.zeros(len(ops))
        if not routed.all():
            rest = np.flatnonzero(~routed)
            times[rest] = self.default.kernel_times(ops.iloc[rest].reset_index(drop=True),
                                                    device)
        for fam, model in sorted(self.routes.items()):
            mask = family == fam
            if mask.any():
                part = ops.iloc[np.flatnonzero(mask)].reset_index(drop=True)
                times[mask] = model.kernel_times(self._as_kernel(part, fam, device), device)
        return times

    def tier(self, device: Device) -> str:
        """The default model's uncertainty tier (intervals are per family, not per source)."""
        return self.default.tier(device)

    def notes(self, ops: pd.DataFrame) -> list[str]:
        """The notes of each model that prices some of `ops` (kernels.model_notes)."""
        family = ops["family"].to_numpy(dtype=object)
        out = model_notes(self.default, ops[~np.isin(family, list(self.routes))])
        for fam, model in sorted(self.routes.items()):
            out += model_notes(model, ops[family == fam])
        return out


def stack_families(stack: Stack, families: tuple[str, ...] = KERNEL_FAMILIES
                   ) -> dict[str, dict]:
    """Per kernel family, device-independent: `status` measured (the stack's own kernels,
    `devices` it was measured on) | borrowed (another stack's kernels: `note` says whose) |
    roofline-only (no measured kernels), and the `kernel_source` whose fit prices it."""
    out = {}
    for family in families:
        source = stack.kernel_source(family)
        cal = shipped_calibration(source)
        fam = family if family in cal.families else FALLBACK.get(family)
        if fam not in cal.families:
            out[family] = {"status": "roofline-only", "kernel_source": None, "devices": [],
                           "note": f"no measured {family} kernels in source {source!r}"}
            continue
        entry = {"status": "measured", "kernel_source": source,
                 "devices": list(calibration_devices(source).get(fam, ()))}
        if family in stack.borrowed:
            entry = {**entry, "status": "borrowed", "note": stack.borrowed[family]}
        elif fam != family:
            entry = {**entry, "status": "borrowed",
                     "note": f"no {family} measurements: priced as the {fam} family"}
        out[family] = entry
    return out


def family_provenance(stack: Stack, device: Device, roofline: bool = False,
                      user_families: frozenset[str] = frozenset()) -> dict[str, dict]:
    """`stack_families` for one device: a family measured for the stack is `measured` only
    where `device` is among its devices, else `cross-generation` (fitted on those devices,
    applied through this device's spec sheet); families a user calibration measured on the
    device are `measured` from it; with `roofline` every family is roofline-only."""
    out = {}
    for family, entry in stack_families(stack).items():
        if roofline:
            entry = {"status": "roofline-only", "kernel_source": None, "devices": [],
                     "note": "--kernel-model roofline"}
        elif family in user_families:
            entry = {"status": "measured", "kernel_source": "user calibration",
                     "devices": [device.name]}
        elif entry["status"] == "measured" and device.name not in entry["devices"]:
            entry = {**entry, "status": "cross-generation"}
        out[family] = entry
    return out


def stack_kernel_model(stack: Stack, default: ExecutionTimeModel,
                       user_families: frozenset[str] = frozenset()) -> ExecutionTimeModel:
    """`default` with the stack's routed families priced by their kernel source (its learned
    model over its physical one when `default` is a learned model); families a user
    calibration measured on the device stay with `default` (which holds it)."""
    if isinstance(default, RooflineModel):
        return default
    from perfcast.kernels._learned import LearnedTimeModel, learned_time_model

    pick = learned_time_model if isinstance(default, LearnedTimeModel) else source_time_model
    routes = {f: pick(s) for f, s in stack.kernel_sources.items()
              if s != DEFAULT_SOURCE and f not in user_families}
    kernels = {f: k for f, k in stack.kernels.items() if f in routes}
    return StackTimeModel(routes, default, kernels) if routes else default
