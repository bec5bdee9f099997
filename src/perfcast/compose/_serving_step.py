"""One serving-engine step (prefill chunks + decode sequences) priced from a few batch
statistics, cached and vectorised for a simulator that asks millions of times.

A step's op rows split into parts with few drivers: token-linear rows (GEMMs, norms,
activations, KV write, TP all-reduces) on the new tokens T; the head (lm_head, sampling) on
the sequences S; MLA's prefill-only and decode-only GEMMs on prefill tokens and decode
sequences; prefill attention on (sequences, mean query, mean context, pairs ratio); decode
attention on (sequences, mean keys). Each part lives on a grid whose cells are priced exactly
by the time model (rows from `step_ops`, see _serving_parts) on first use and interpolated
linearly in between; grids are dense (every integer) where tile and wave steps live.
"""

from __future__ import annotations

import numpy as np

from perfcast.compose._host import host_overhead_s
from perfcast.compose._serving_parts import ATTN_COL, CATEGORIES, WHERE, StepGrids
from perfcast.compose._serving_stats import BatchStats, scalar_stats
from perfcast.compose._step import EAGER_DISPATCH_S, Execution
from perfcast.errors import InputError
from perfcast.kernels import ExecutionTimeModel, RooflineModel
from perfcast.specs import Cluster, ModelSpec, ParallelPlan, Precision

__all__ = ["BatchStats", "ServingStepModel"]


class ServingStepModel(StepGrids):
    """Step times of one deployment (model, cluster, precision, plan, kernel model) for any
    mixed batch. Grid cells are priced lazily and kept, so results never depend on the order
    of queries. `max_*` bound the grids; larger batches are refused."""

    def __init__(self, model: ModelSpec, cluster: Cluster, precision: Precision | None = None,
                 plan: ParallelPlan | None = None, time_model: ExecutionTimeModel | None = None,
                 execution: Execution | str = Execution.CUDA_GRAPH, host: str = "vllm-v0", *,
                 max_tokens: int = 131072, max_seqs: int = 1024, max_context: int = 131072):
        if model.kind != "decoder":
            raise InputError("model", f"{model.name} is {model.kind}; serving steps are "
                             "modelled for decoder-only models", "decoder")
        for name, v in (("max_tokens", max_tokens), ("max_seqs", max_seqs),
                        ("max_context", max_context)):
            if not 1 <= v <= 1 << 22:
                raise InputError(name, f"must be in [1, {1 << 22}], got {v}")
        self.model, self.cluster = model, cluster
        self.precision, self.plan = precision or Precision(), plan or ParallelPlan()
        self.plan.check(model)
        self.time_model = time_model or RooflineModel()
        try:
            self.execution = Execution(execution)
        except ValueError:
            raise InputError("execution", f"unknown mode {execution!r}",
                             [e.value for e in Execution]) from None
        h0 = host_overhead_s(host, 0, self.plan.tp)
        self.host_s = (h0, host_overhead_s(host, 1, self.plan.tp) - h0)
        self.limits = (max_tokens, max_seqs, max_context)
        self._limits = ((max_tokens, "max_tokens"), (max_seqs, "max_seqs"),
                        (max_context, "max_context"), (max_context + 1, "max_context"))
        self.window = model.sliding_window
        self._build()


    # -- queries -----------------------------------------------------------------------
    def _check(self, name: str, value: float, limit: tuple[float, str]) -> None:
        if value > limit[0]:
            raise InputError(name, f"exceeds this model's grid ({limit[1]}={limit[0]:g})",
                             f"<= {limit[0]:g}, or a ServingStepModel with a larger {limit[1]}")

    def _columns(self, st: BatchStats, ncols: int | None = None) -> np.ndarray:
        """(n, 13) busy seconds (kernels + collectives) per total/category x where column;
        (n, 1) totals only with ncols=1."""
        pt, ps, ds = st.prefill_tokens_total, st.prefill_seqs, st.decode_seqs
        tokens, seqs = pt + ds, ps + ds
        s, q, c, r = st.prefill_points()
        mean_keys = st.decode_keys_total / np.maximum(ds, 1)
        for name, value, limit in zip(("tokens", "sequences", "prefill_context",
                                       "decode_context"),
                                      (tokens.max(), np.maximum(ps, ds).max(), c.max(),
                                       mean_keys.max()), self._limits, strict=True):
            self._check(name, value, limit)
        out = (self.t_grid.interp(tokens[:, None], ncols)
               + self.s_grid.interp(seqs[:, None], ncols))
        for grid, x, on in ((self.pt_grid, pt[:, None], pt > 0),
                            (self.sd_grid, ds[:, None], ds > 0),
                            (self.decode_grid, np.column_stack([ds, mean_keys]), ds > 0),
                            (self.prefill_grid, np.column_stack([s, q, c, r]), ps > 0)):
            if grid is None or not on.any():
                continue
            part = grid.interp(x[on], ncols)
            if part.shape[1] == 1 and out.shape[1] > 1:  # attention: one column
                out[on, ATTN_COL] += part[:, 0]
            out[on, :part.shape[1]] += part
        return out

    def _overheads(self, busy, st: BatchStats) -> tuple[np.ndarray, np.ndarray]:
        """(eager launch idle, host) seconds. Eager: the host dispatches N kernels d apart;
        with identical layers the queue ends at max(d + busy, N·d) (first or last kernel
        binding), a close stand-in for step_time's exact queue."""
        seqs = st.prefill_seqs + st.decode_seqs
        host = self.host_s[0] + self.host_s[1] * seqs
        if self.execution != Execution.EAGER:
            return np.zeros_like(busy), host
        n_t, n_s, n_pt, n_d, n_p = self.launches
        n = (n_t + n_s + n_pt * (st.prefill_tokens_total > 0) + n_d * (st.decode_seqs > 0)
             + n_p * (st.prefill_seqs > 0))
        d = EAGER_DISPATCH_S
        if self.cluster.device.kind == "cpu":
            return d * n, host
        return np.maximum(np.maximum(busy + d, n * d) - busy, 0.0), host

    def step_times_s(self, stats: BatchStats) -> np.ndarray:
        """Seconds per step for many batches at once."""
        busy = self._columns(stats, ncols=1)[:, 0]
        launch, host = self._overheads(busy, stats)
        return busy + launch + host

    def step_time_s(self, prefill_tokens=(), prefill_context=(), decode_context=()) -> float:
        """Seconds of one step (sequences of ints as in `perfcast.ops.Batch`); plain Python,
        microseconds per call once the grid cells it touches are priced."""
        pt, ps, pk, pp, ds, dk = scalar_stats(prefill_tokens, prefill_context, decode_context,
                                              self.window)
        if self.execution == Execution.EAGER:  # rare in a simulator: take the array path
            return float(self.step_times_s(BatchStats(*([v] for v in (pt, ps, pk, pp, ds,
                                                                      dk))))[0])
        tokens, seqs = pt + ds, ps + ds
        q = pt / ps if ps else 0.0
        c = (pk - pt) / ps if ps else 0.0
        mean_keys = dk / ds if ds else 0.0
        lim = self._limits
        for name, value, limit in (("tokens", tokens, lim[0]), ("sequences", max(ps, ds), lim[1]),
                                   ("prefill_context", c, lim[2]),
                                   ("decode_context", mean_keys, lim[3])):
            if value > limit[0]:
                self._check(name, value, limit)
        busy = self.t_grid.total((tokens,)) + self.s_grid.total((seqs,))
        if ds:
            busy += self.decode_grid.total((ds, mean_keys))
            if self.sd_grid is not None:
                busy += self.sd_grid.total((ds,))
        if ps:
            busy += self.prefill_grid.total((ps, q, c, pp / (ps * (q * c + q * (q + 1) / 2))))
            if self.pt_grid is not None:
                busy += self.pt_grid.total((pt,))
        return busy + self.host_s[0] + self.host_s[1] * seqs

    def breakdown(self, prefill_tokens=(), prefill_context=(), decode_context=()
                  ) -> dict[str, float]:
        """Seconds of one step by kind: gemm, attention, comm, other kernels (norms,
        activations, elementwise, KV write, embedding, sampling), launch, host; and time."""
        st = BatchStats(*([v] for v in scalar_stats(prefill_tokens, prefill_context,
                                                    decode_context, self.window)))
        cols = self._columns(st)[0]
        launch, host = (float(x[0]) for x in self._overheads(cols[:1], st))
        out = {f"{cat}_s": float(cols[1 + i * len(WHERE):1 + (i + 1) * len(WHERE)].sum())
               for i, cat in enumerate(CATEGORIES)}
        return {**out, "launch_s": launch, "host_s": host, "time_s": cols[0] + launch + host}

    def stage_times_s(self, stats: BatchStats) -> np.ndarray:
        """(n, pp) busy seconds per pipeline stage: the stage's share of the layer stack
        (layers split as evenly as possible, earlier stages taking the remainder), the
        embedding on the first stage and the head on the last; host and launch excluded."""
        cols = self._columns(stats)[:, 1:].reshape(len(stats), len(CATEGORIES), len(WHERE))
        first, layers, last = (cols[:, :, w].sum(axis=1) for w in range(len(WHERE)))
        pp, n_layers = self.plan.pp, self.model.num_layers
        share = np.array([len(a) for a in np.array_split(np.arange(n_layers), pp)]) / n_layers
        out = layers[:, None] * share[None, :]
        out[:, 0] += first
        out[:, -1] += last
        return out
