"""What the simulator consumes to price engine steps, as declared Protocols.

`StepTimeModel` is the least a step model gives `simulate`: the seconds of one step of a
mixed batch (prefill chunks beside decode sequences) and the sliding window its decode
batches depend on. `StatsStepTimeModel` adds what the faster and wider paths need: many
batches at once and per pipeline stage (pp > 1, eager execution), the scalar six-statistic
path and whole runs of decode steps (the simulator's fast path, speculative decoding).
`perfcast.compose.ServingStepModel` is both; a test double needs only the first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from perfcast.compose import BatchStats

__all__ = ["StatsStepTimeModel", "StepTimeModel"]


@runtime_checkable
class StepTimeModel(Protocol):
    """Seconds of one engine step; `window` is the model's sliding window in tokens (None:
    full attention), which decides whether a decode batch's context total describes it."""

    window: int | None

    def step_time_s(self, prefill_tokens: Sequence[int] = (),
                    prefill_context: Sequence[int] = (),
                    decode_context: Sequence[int] = ()) -> float: ...


@runtime_checkable
class StatsStepTimeModel(StepTimeModel, Protocol):
    """A step model that also prices batches from their statistics (see
    `compose.ServingStepModel` for each method's contract). `host_overlap`: the engine
    prepares the next step while the GPU runs this one (step = max(GPU, host))."""

    host_overlap: bool

    def step_times_s(self, stats: BatchStats) -> np.ndarray: ...

    def stage_times_s(self, stats: BatchStats) -> np.ndarray: ...

    def stats_time_s(self, pt: float, ps: float, pk: float, pp: float, ds: float,
                     dk: float) -> float: ...

    def decode_run_s(self, seqs: int, keys: int, k: int, start_s: float = 0.0,
                     horizon_s: float = float("inf")) -> tuple[list[float], list[float]]: ...
