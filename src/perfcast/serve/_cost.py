"""Seconds per engine step for the simulator, from a step model (`StepTimeModel`; the
shipped one is `perfcast.compose.ServingStepModel`).

Decode batches are described by (sequences, total context): for a model without a sliding
window that is all a step's time depends on, so an equal-split context tuple stands in for
the batch (O(1) Python whatever its size). Runs of decode-only steps (`decode_run_s`) are
priced at a few points: a run's step time is piecewise linear in the step index (multilinear
grid interpolation, context growing by one token per sequence per step), so the run is
bisected until each piece is linear and filled in between with numpy. With a
`StatsStepTimeModel` (no sliding window, one stage, CUDA graphs) `fast` is set: steps are priced
from their six statistics (`stats_s`, no context tuples) and a run's steps one by one, exactly,
by the model's `decode_run_s` up to the horizon (see `Stepper._fast_run`).

Pipeline parallelism (pp > 1): the batch is split into m = min(pp, sequences) micro-batches
that keep the stages busy (vLLM's virtual engines); a step then takes max(sum of stage times
/ m, slowest stage) + host time, i.e. the pipeline-full rate with the one-micro-batch latency
as its floor (stage costs are taken as linear in the micro-batch share).
"""

from __future__ import annotations

import numpy as np

from perfcast.compose import BatchStats, host_overhead_s
from perfcast.errors import InputError
from perfcast.ops import Batch
from perfcast.serve._config import ServeConfig
from perfcast.serve._step_model import StatsStepTimeModel, StepTimeModel

__all__ = ["StepCost"]

_LINEAR_RTOL = 1e-9


def _equal_split(n: int, total: int) -> tuple[int, ...]:
    q, r = divmod(total, n)
    return (q + 1,) * r + (q,) * (n - r)


class StepCost:
    """Step seconds for one replica's batches (prefill chunks + a decode set)."""

    def __init__(self, config: ServeConfig, model: StepTimeModel):
        self.model = model
        self.pp, self.tp, self.host = config.pp, config.tp, config.host
        self.windowed = config.model_spec.uniform_window is not None
        self.scalar = config.pp == 1 and config.execution == "cuda-graph"
        stats = isinstance(model, StatsStepTimeModel)
        if not stats and (not self.scalar or config.spec_k):
            raise InputError("step_model", f"{type(model).__name__} prices single steps only; "
                             "pipeline stages, eager execution and speculative decoding need "
                             "a StatsStepTimeModel", "perfcast.serve.step_model_for(config)")
        # statistics straight to the model (no context tuples) and whole decode runs in one
        # vectorised call: needs the model's stats API and no sliding window
        self.fast = self.scalar and not self.windowed and stats

    def step_s(self, prefill_tokens: tuple[int, ...], prefill_context: tuple[int, ...],
               decode_context: tuple[int, ...]) -> float:
        if self.scalar:
            return self.model.step_time_s(prefill_tokens, prefill_context, decode_context)
        return float(self._vector(prefill_tokens, prefill_context, decode_context))

    def stats_s(self, pt: float, ps: float, pk: float, pp: float, ds: float,
                dk: float) -> float:
        """`step_s` from the batch's six statistics (only when `fast`)."""
        return self.model.stats_time_s(pt, ps, pk, pp, ds, dk)

    def decode_contexts(self, n: int, total: int, exact) -> tuple[int, ...]:
        """The decode batch's context tuple: equal split unless the model has a window."""
        return exact() if self.windowed else _equal_split(n, total)

    def _vector(self, pt, pc, dc) -> float:
        stats = BatchStats.of(Batch(tuple(pt), tuple(pc), tuple(dc)), self.model.window)
        if self.pp == 1:
            return float(self.model.step_times_s(stats)[0])
        stages = self.model.stage_times_s(stats)[0]
        m = min(self.pp, len(pt) + len(dc))
        host = host_overhead_s(self.host, len(pt) + len(dc), self.tp)
        gpu = max(float(stages.sum()) / m, float(stages.max()))
        return max(gpu, host) if self.model.host_overlap else gpu + host

    def decode_run_s(self, step_s, k: int) -> np.ndarray:
        """Seconds of steps 0..k-1 of a decode-only run, `step_s(j)` the j-th step's time,
        rebuilt from a few evaluations by bisection into linear pieces."""
        if k <= 3:
            return np.array([step_s(j) for j in range(k)])
        knots = {0: step_s(0), k - 1: step_s(k - 1)}
        todo = [(0, k - 1)]
        while todo:
            lo, hi = todo.pop()
            if hi - lo < 2:
                continue
            mid = (lo + hi) // 2
            f_mid = step_s(mid)
            knots[mid] = f_mid
            chord = knots[lo] + (knots[hi] - knots[lo]) * (mid - lo) / (hi - lo)
            if abs(f_mid - chord) > _LINEAR_RTOL * abs(f_mid):
                todo += [(lo, mid), (mid, hi)]
        xs = sorted(knots)
        return np.interp(np.arange(k), xs, [knots[x] for x in xs])
