"""Quantities users write with units: latency SLOs (`500ms`, `0.5s`), and the sanity bounds
on sizes a typo can blow up.

vLLM's benchmarks and AIConfigurator take SLOs in milliseconds, perfcast in seconds: an SLO
may carry its unit (`500ms`, `0.5s`, `2s`, `800us`); a bare number is seconds, as documented,
unless it is so large it can only be milliseconds (`--tpot-slo 50`), which is refused with
the spelling to use instead of being read as 50 s.
"""

from __future__ import annotations

import math
import re
from typing import Any

from perfcast.errors import InputError

__all__ = ["MAX_BATCH", "MAX_GPUS", "MAX_REQUESTS", "MAX_TOKENS", "SLO_FORMS",
           "TPOT_PLAIN_MAX_S", "TTFT_PLAIN_MAX_S", "parse_seconds"]

# Sizes no real question reaches; above them the input is a typo (an extra digit, a unit
# missed) and the forecast would print nonsense or run for hours.
MAX_TOKENS = 10_000_000  # tokens in one prompt or answer: the longest context windows
MAX_BATCH = 1_000_000  # sequences or images in one batch (LLM global batches are ~1-4k)
MAX_REQUESTS = 10_000_000  # simulated requests: ~1 day of traffic at 100 req/s
MAX_GPUS = 1_000_000  # GPUs in one job: 5x the largest clusters built

# Bare SLO numbers at or above these can only be milliseconds: no one sets a 10 s per-token
# or a 100 s time-to-first-token objective.
TPOT_PLAIN_MAX_S = 10.0
TTFT_PLAIN_MAX_S = 100.0

SLO_FORMS = "seconds (0.5, 0.5s) or milliseconds (500ms)"
_SCALE = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}
_QUANTITY = re.compile(r"\s*([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*"
                       r"([a-zµ]*)\s*")


def parse_seconds(value: Any, field: str, plain_max_s: float) -> float | None:
    """Seconds from an SLO as a user writes it: a number (seconds), or text with a unit
    (`500ms`, `0.5s`, `800us`; none: seconds). A bare number >= `plain_max_s` is refused as
    milliseconds written without their unit; None stays None (no SLO)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InputError(field, f"not a duration: {value!r}", SLO_FORMS)
    if isinstance(value, int | float):
        number, unit = float(value), ""
    else:
        match = _QUANTITY.fullmatch(str(value).lower())
        if match is None or match.group(2) not in _SCALE:
            raise InputError(field, f"not a duration: {value!r}", SLO_FORMS)
        number, unit = float(match.group(1)), match.group(2)
    seconds = number * _SCALE[unit]
    if not math.isfinite(seconds) or seconds <= 0:
        raise InputError(field, f"must be > 0, got {value!r}", SLO_FORMS)
    if not unit and number >= plain_max_s:
        raise InputError(field, f"{value!r} looks like milliseconds (it would be {number:g} "
                         f"seconds); write {number:g}ms", SLO_FORMS)
    return seconds
