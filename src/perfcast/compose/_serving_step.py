"""One serving-engine step (prefill chunks + decode sequences) priced from a few batch
statistics, cached and vectorised for a simulator that asks millions of times.

A step's op rows split into parts with few drivers: token-linear rows (GEMMs, norms,
activations, KV write, TP all-reduces) on the new tokens T; the head (lm_head, sampling) on
the sequences S; MLA's prefill-only and decode-only GEMMs on prefill tokens and decode
sequences; prefill attention on (sequences, mean query, mean context, pairs ratio);
decode attention on (sequences, mean keys). Each part lives on a grid whose cells are priced exactly
by the time model (rows from `step_ops`, see _serving_parts) on first use and interpolated
linearly in between; grids are dense (every integer) where tile and wave steps live.
"""

from __future__ import annotations

import copy
from bisect import bisect_right

import numpy as np

from perfcast.comm import CollectiveModel, default_collective_model
from perfcast.compose._host import host_overhead_s
from perfcast.compose._serving_grid import locate
from perfcast.compose._serving_parts import ATTN_COL, CATEGORIES, WHERE, StepGrids
from perfcast.compose._serving_stats import BatchStats, scalar_stats
from perfcast.compose._step import EAGER_DISPATCH_S, Execution
from perfcast.errors import InputError
from perfcast.kernels import ExecutionTimeModel, default_time_model
from perfcast.specs import Cluster, ModelSpec, ParallelPlan, Precision

__all__ = ["BatchStats", "ServingStepModel"]


class ServingStepModel(StepGrids):
    """Step times of one deployment (model, cluster, precision, plan, kernel model) for any
    mixed batch. Grid cells are priced lazily and kept, so results never depend on the order
    of queries. `max_*` bound the grids; larger batches are refused."""

    def __init__(self, model: ModelSpec, cluster: Cluster, precision: Precision | None = None,
                 plan: ParallelPlan | None = None, time_model: ExecutionTimeModel | None = None,
                 execution: Execution | str = Execution.CUDA_GRAPH, host: str = "vllm-v0", *,
                 host_overlap: bool = False, comm_model: CollectiveModel | None = None,
                 max_tokens: int = 131072, max_seqs: int = 1024, max_context: int = 131072,
                 prefill_dispatch_s: float = 0.0, host_speed: float = 1.0):
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
        self.time_model = time_model or default_time_model()
        self.comm_model = comm_model or default_collective_model()
        try:
            self.execution = Execution(execution)
        except ValueError:
            raise InputError("execution", f"unknown mode {execution!r}",
                             [e.value for e in Execution]) from None
        h0 = host_overhead_s(host, 0, self.plan.tp)
        self._profile_s = (h0, host_overhead_s(host, 1, self.plan.tp) - h0)
        self._set_host(prefill_dispatch_s, host_speed)
        # engines that prepare step n+1 on the CPU while the GPU runs step n (SGLang's and
        # TensorRT-LLM's overlap schedulers, vLLM's async scheduling): step = max(GPU, host)
        self.host_overlap = host_overlap
        self.limits = (max_tokens, max_seqs, max_context)
        self._limits = ((max_tokens, "max_tokens"), (max_seqs, "max_seqs"),
                        (max_context, "max_context"), (max_context + 1, "max_context"))
        self.window = model.uniform_window
        self._decode_const: dict[int, tuple] = {}  # per sequence count, for decode_run_s
        self._build()

    def _set_host(self, prefill_dispatch_s: float, host_speed: float) -> None:
        """Host costs on a CPU `host_speed` times the reference's: the profile's per step
        and, as CUDA-graph engines replay only decode-only steps, `prefill_dispatch_s` per
        kernel of a step with prefill tokens (Stack.host.prefill_dispatch_s)."""
        if not host_speed > 0:
            raise InputError("host_speed", f"must be > 0, got {host_speed}", "> 0")
        if not 0 <= prefill_dispatch_s <= 1e-3:
            raise InputError("prefill_dispatch_s", f"must be in [0, 1e-3] s, got "
                             f"{prefill_dispatch_s}", "[0, 1e-3]")
        self.host_speed, self._dispatch_s = host_speed, prefill_dispatch_s
        self.host_s = (self._profile_s[0] / host_speed, self._profile_s[1] / host_speed)
        self.prefill_dispatch_s = prefill_dispatch_s / host_speed

    def with_host(self, prefill_dispatch_s: float, host_speed: float = 1.0
                  ) -> ServingStepModel:
        """This deployment's step model under other host costs, sharing its priced grids
        (host costs never enter them): what a search over host parameters replays; itself
        under its own costs."""
        if (prefill_dispatch_s, host_speed) == (self._dispatch_s, self.host_speed):
            return self
        other = copy.copy(self)
        other._set_host(prefill_dispatch_s, host_speed)
        return other

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

    def _kernels(self, prefill_tokens, decode_seqs, prefill_seqs):
        """Kernels a step launches (scalars or arrays of its batch statistics): every
        layer's token and sequence kernels, plus the prefill-token, decode and prefill
        attention kernels where the step has such work."""
        n_t, n_s, n_pt, n_d, n_p = self.launches
        return (n_t + n_s + n_pt * (prefill_tokens > 0) + n_d * (decode_seqs > 0)
                + n_p * (prefill_seqs > 0))

    def _overheads(self, busy, st: BatchStats) -> tuple[np.ndarray, np.ndarray]:
        """(eager launch idle, host) seconds. Eager: the host dispatches N kernels d apart;
        with identical layers the queue ends at max(d + busy, N·d) (first or last kernel
        binding), a close stand-in for step_time's exact queue. Under CUDA graphs only the
        steps with prefill tokens queue so, d = prefill_dispatch_s (decode-only steps
        replay a graph)."""
        seqs = st.prefill_seqs + st.decode_seqs
        host = self.host_s[0] + self.host_s[1] * seqs
        eager = self.execution == Execution.EAGER
        if not eager and not self.prefill_dispatch_s:
            return np.zeros_like(busy), host
        n = self._kernels(st.prefill_tokens_total, st.decode_seqs, st.prefill_seqs)
        d = EAGER_DISPATCH_S if eager else self.prefill_dispatch_s
        if eager and self.cluster.device.kind == "cpu":
            return d * n, host
        idle = np.maximum(np.maximum(busy + d, n * d) - busy, 0.0)
        return (idle if eager else np.where(st.prefill_tokens_total > 0, idle, 0.0)), host

    def step_times_s(self, stats: BatchStats) -> np.ndarray:
        """Seconds per step for many batches at once."""
        busy = self._columns(stats, ncols=1)[:, 0]
        launch, host = self._overheads(busy, stats)
        if self.host_overlap:
            return np.maximum(busy + launch, host)
        return busy + launch + host

    def step_time_s(self, prefill_tokens=(), prefill_context=(), decode_context=()) -> float:
        """Seconds of one step (sequences of ints as in `perfcast.ops.Batch`); plain Python,
        microseconds per call once the grid cells it touches are priced."""
        pt, ps, pk, pp, ds, dk = scalar_stats(prefill_tokens, prefill_context, decode_context,
                                              self.window)
        if self.execution == Execution.EAGER:  # rare in a simulator: take the array path
            return float(self.step_times_s(BatchStats(*([v] for v in (pt, ps, pk, pp, ds,
                                                                      dk))))[0])
        return self.stats_time_s(pt, ps, pk, pp, ds, dk)

    def stats_time_s(self, pt: float, ps: float, pk: float, pp: float, ds: float,
                     dk: float) -> float:
        """`step_time_s` from the six batch statistics (as `scalar_stats` gives them: new
        prefill tokens, prefill sequences, prefill keys, attended pairs, decode sequences,
        decode keys), CUDA-graph execution only (prefill steps dispatched per
        `prefill_dispatch_s`); no validation of the statistics."""
        tokens, seqs = pt + ds, ps + ds
        q = pt / ps if ps else 0.0
        c = (pk - pt) / ps if ps else 0.0
        mean_keys = dk / ds if ds else 0.0
        lim = self._limits
        if tokens > lim[0][0] or max(ps, ds) > lim[1][0] or c > lim[2][0] \
                or mean_keys > lim[3][0]:
            for name, value, limit in (("tokens", tokens, lim[0]),
                                       ("sequences", max(ps, ds), lim[1]),
                                       ("prefill_context", c, lim[2]),
                                       ("decode_context", mean_keys, lim[3])):
                self._check(name, value, limit)
        busy = self.t_grid.total((tokens,)) + self.s_grid.total((seqs,))
        if ds:  # (attention grids are None for attention-free models)
            if self.decode_grid is not None:
                busy += self.decode_grid.total((ds, mean_keys))
            if self.sd_grid is not None:
                busy += self.sd_grid.total((ds,))
        if ps:
            if self.prefill_grid is not None:
                busy += self.prefill_grid.total((ps, q, c,
                                                 pp / (ps * (q * c + q * (q + 1) / 2))))
            if self.pt_grid is not None:
                busy += self.pt_grid.total((pt,))
        if pt and self.prefill_dispatch_s:  # dispatched from Python (_overheads)
            d = self.prefill_dispatch_s
            busy = max(busy + d, self._kernels(pt, ds, ps) * d)
        host = self.host_s[0] + self.host_s[1] * seqs
        return max(busy, host) if self.host_overlap else busy + host

    def decode_run_s(self, seqs: int, keys: int, k: int, start_s: float = 0.0,
                     horizon_s: float = float("inf")) -> tuple[list[float], list[float]]:
        """A run of decode-only steps of `seqs` sequences whose total keys read are keys,
        keys + seqs, keys + 2 seqs, ...: (durations, ends) of its first steps, step j taking
        exactly `stats_time_s(0, 0, 0, 0, seqs, keys + j seqs)` (CUDA-graph execution) and
        ending at the running sum from `start_s`; stops after k steps or at the first step
        ending at or after `horizon_s`. Plain Python, well under a microsecond per step: the
        sequence count is an integer grid point, so only the keys axis is interpolated."""
        ds = float(seqs)
        const = self._decode_const.get(seqs)
        if const is None and self.decode_grid is None:  # attention-free: the general path
            const = (0.0, None, 0, False)
        elif const is None:
            lim = self._limits
            self._check("tokens", ds, lim[0])
            self._check("sequences", ds, lim[1])
            c = self.t_grid.total((ds,)) + self.s_grid.total((ds,))
            grid = self.decode_grid
            i0, a = locate(grid.lists[0], ds)
            row = (i0 + (1 if a == 1.0 else 0)) * grid.strides[0]
            sd = self.sd_grid.total((ds,)) if self.sd_grid is not None else None
            const = (c, sd, row, a in (0.0, 1.0))
            self._decode_const[seqs] = const
        c, sd, row, exact = const
        if not exact:  # not expected (every sequence count is a grid point): general path
            durations = [self.stats_time_s(0.0, 0.0, 0.0, 0.0, ds, float(keys + seqs * j))
                         for j in range(k)]
            ends, t = [], start_s
            for d in durations:
                t += d
                ends.append(t)
            return durations, ends
        grid = self.decode_grid
        axis, col, limit = grid.lists[1], grid.col0, self._limits[3]
        top = len(axis) - 2
        h0, h1 = self.host_s[0], self.host_s[1] * ds
        overlap = self.host_overlap
        durations, ends, t = [], [], start_s
        jc = max(min(bisect_right(axis, keys / ds) - 1, top), 0)
        lo, hi = axis[jc], axis[jc + 1]
        for j in range(k):
            x = (keys + seqs * j) / ds
            if x > limit[0]:
                self._check("decode_context", x, limit)
            while x >= hi and jc < top:
                jc += 1
                lo, hi = hi, axis[jc + 1]
            w = (x - lo) / (hi - lo)
            f = row + jc
            if w <= 0.0:
                v = col[f]
                if v != v:
                    grid._fill(np.array([f]))
                    v = col[f]
                dec = 1.0 * v
            elif w >= 1.0:
                v = col[f + 1]
                if v != v:
                    grid._fill(np.array([f + 1]))
                    v = col[f + 1]
                dec = 1.0 * v
            else:
                v, u = col[f], col[f + 1]
                if v != v or u != u:
                    grid._fill(np.array([f, f + 1]))
                    v, u = col[f], col[f + 1]
                dec = (1.0 - w) * v + w * u
            busy = c + dec
            if sd is not None:
                busy += sd
            d = max(busy, h0 + h1) if overlap else busy + h0 + h1
            t += d
            durations.append(d)
            ends.append(t)
            if t >= horizon_s:
                break
        return durations, ends

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
        total = max(cols[0] + launch, host) if self.host_overlap else cols[0] + launch + host
        return {**out, "launch_s": launch, "host_s": host, "time_s": total}

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
