"""Seconds of the optimizer step: Adam over the parameters one GPU updates, priced by the
kernel model (ops' `adam_rows`: a bandwidth-bound elementwise pass over master weights,
moments and gradients, as many bytes as the memory policy keeps)."""

from __future__ import annotations

import weakref

import numpy as np

from perfcast.kernels import ExecutionTimeModel
from perfcast.ops._training import adam_rows
from perfcast.specs import Device

__all__ = ["adam_seconds"]

_MEMO: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_MEMO_LIMIT = 1 << 16


def adam_seconds(time_model: ExecutionTimeModel, device: Device, params: np.ndarray,
                 state: dict[str, float]) -> np.ndarray:
    """Seconds of one Adam step per entry of `params` (0 for no parameters), each reading and
    writing `state`'s adam_read / adam_write bytes per parameter (the memory policy's,
    perfcast.train.state_bytes_per_param); distinct counts are priced once, in one
    kernel-model call, and remembered per time model, device and bytes."""
    params = np.asarray(params, dtype=float)
    traffic = (state["adam_read"], state["adam_write"])
    try:
        memo = _MEMO.setdefault(time_model, {}).setdefault(
            (device.model_dump_json(), traffic), {})
    except TypeError:  # not weak-referenceable: no memo across calls
        memo = {}
    if len(memo) > _MEMO_LIMIT:
        memo.clear()
    values = np.unique(params[params > 0])
    missing = [v for v in values.tolist() if v not in memo]
    if missing:
        times = np.asarray(time_model.kernel_times(adam_rows(missing, *traffic), device),
                           dtype=float)
        memo.update(zip(missing, times.tolist(), strict=True))
    flat = np.array([memo.get(v, 0.0) if v > 0 else 0.0 for v in params.ravel().tolist()])
    return flat.reshape(params.shape)
