"""CPU work between forward passes (scheduling, input prep, sampling, output processing)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from perfcast.errors import InputError

__all__ = ["HOST_PROFILES", "host_overhead_s"]

# name -> fit in data/host_overhead.json (None: no host cost, e.g. a pure kernel benchmark)
HOST_PROFILES = {"none": None, "vllm-v0": "a100", "vllm-v0-a40": "a40"}


@cache
def _fits() -> dict:
    text = (resources.files("perfcast.compose") / "data" / "host_overhead.json").read_text()
    return json.loads(text)["fits"]


def host_overhead_s(profile: str, batch: int, tp: int) -> float:
    """Seconds of host time per step for a serving-engine profile (fitted on Vidur's A100/A40
    vLLM-v0 CPU-overhead tables; the A100 box's host is the default)."""
    if profile not in HOST_PROFILES:
        raise InputError("host_overhead", f"unknown profile {profile!r}", list(HOST_PROFILES))
    key = HOST_PROFILES[profile]
    if key is None:
        return 0.0
    fit = _fits()[key]
    return fit["base_s"] + fit["per_seq_s"] * batch + (fit["tp_extra_s"] if tp > 1 else 0.0)
