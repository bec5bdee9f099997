"""Microbenchmark sweeps: time the perfcast op families on this machine and return rows in the
measurement-store schema (`STORE_COLUMNS`), so the same cost model can be fitted and checked.

FLOP and byte counts follow perfcast.ops conventions (see `family_cost`), not what numpy
actually moves: a numpy GELU makes several passes over memory, but the model's activation
kernel reads x once and writes y once, and the measurement is what that kernel costs here.

Every sweep times its shapes one by one (`_timed`): a caller's `progress(done, total)` hears
of each row, and Ctrl-C raises `SweepInterrupted` carrying the rows timed before it, so the
caller can keep them.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.measure._cpu import CPU_DEVICE_NAME, _median_ns
from perfcast.measure._schema import STORE_COLUMNS, check_measurements
from perfcast.progress import ProgressFn
from perfcast.specs import bytes_per_element

__all__ = ["FAMILIES", "THREAD_ENV_VARS", "SweepInterrupted", "blas_description",
           "family_cost", "run_cpu_sweep", "sweep_shapes"]

FAMILIES = ("gemm", "elementwise", "activation", "softmax", "norm")
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                   "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")

# The source's op name per family (the `op` column).
_OP_NAMES = {"gemm": "matmul", "elementwise": "add", "activation": "gelu_tanh",
             "softmax": "softmax", "norm": "layernorm"}
# Each timed repeat calls the kernel back to back until this much time has passed (timer
# resolution and loop overhead stay < 1%); the recorded latency is the per-call mean of a
# repeat, and the row keeps the median over repeats.
_MIN_REPEAT_NS = 200_000
_MAX_INNER = 10_000

Shape = tuple[int, int, int]  # (m, n, k); k = 0 for vector families


# ---------------------------------------------------------------- conventions and shapes


def family_cost(family: str, m: float, n: float, k: float = 0.0,
                elem_bytes: float = 4.0) -> tuple[float, float]:
    """(FLOPs, bytes) of one kernel of `family`, by perfcast.ops conventions.

    gemm [m,k]x[k,n]: 2mnk FLOPs, (mk + kn + mn) elements; elementwise add: mn FLOPs, 3mn
    elements (2 reads, 1 write); tanh-GELU: 8mn FLOPs, 2mn elements; softmax over the last
    dim: 5mn FLOPs, 2mn elements; LayerNorm over the last dim: 5mn FLOPs, 2mn + 2n elements
    (gamma and beta)."""
    mn = m * n
    if family == "gemm":
        return 2.0 * mn * k, elem_bytes * (m * k + k * n + mn)
    if family == "elementwise":
        return float(mn), 3.0 * elem_bytes * mn
    if family == "activation":
        return 8.0 * mn, 2.0 * elem_bytes * mn
    if family == "softmax":
        return 5.0 * mn, 2.0 * elem_bytes * mn
    if family == "norm":
        return 5.0 * mn, 2.0 * elem_bytes * mn + 2.0 * elem_bytes * n
    raise InputError("family", f"unknown family {family!r}", FAMILIES)


def _odd_size(rng: np.random.Generator, lo: int, hi: int) -> int:
    """A log-uniform size in [lo, hi] that is not a power of two."""
    while True:
        size = int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))
        if size & (size - 1):
            return size


def sweep_shapes(quick: bool = False, seed: int = 0, gpu: bool = False) -> dict[str, list[Shape]]:
    """The (m, n, k) shapes each family is timed at: a power-of-two grid plus seeded sizes
    that are not powers of two. Deterministic for a given (quick, seed, gpu)."""
    rng = np.random.default_rng(seed)
    if gpu:
        pow2 = [64, 256, 1024, 4096] if quick else [16, 64, 256, 1024, 2048, 4096, 8192]
        skinny_m, hi, n_odd = [1, 8], pow2[-1], (8 if quick else 48)
        vec_m = [1, 64, 1024, 8192] if quick else [1, 16, 128, 1024, 4096, 16384]
        vec_n = [1024, 8192] if quick else [256, 1024, 4096, 8192, 16384]
        vec_hi = 8192 if quick else 16384
    else:
        pow2 = [16, 64, 256, 512] if quick else [16, 32, 64, 128, 256, 512, 1024, 2048]
        skinny_m, hi, n_odd = ([1] if quick else [1, 4]), pow2[-1], (8 if quick else 64)
        vec_m = [1, 64, 1024] if quick else [1, 8, 64, 512, 4096]
        vec_n = [256, 4096] if quick else [128, 512, 2048, 4096, 8192]
        vec_hi = 4096 if quick else 8192
    gemm = [(m, n, k) for m in pow2 for n in pow2 for k in pow2]
    gemm += [(m, n, k) for m in skinny_m for n in pow2 for k in pow2 if n >= 256 and k >= 256]
    gemm += [(_odd_size(rng, 16, hi), _odd_size(rng, 16, hi), _odd_size(rng, 16, hi))
             for _ in range(n_odd)]
    shapes = {"gemm": gemm}
    for family in FAMILIES[1:]:
        grid = [(m, n, 0) for m in vec_m for n in vec_n]
        grid += [(_odd_size(rng, 3, vec_hi), _odd_size(rng, 64, vec_hi), 0)
                 for _ in range(4 if quick else 8)]
        shapes[family] = grid
    return shapes


def _select(families: Iterable[str] | None, shapes: Mapping[str, Sequence[Sequence[int]]] | None,
            quick: bool, seed: int, gpu: bool) -> dict[str, list[Shape]]:
    chosen = list(FAMILIES if families is None else families)
    unknown = sorted(set(chosen) - set(FAMILIES))
    if unknown:
        raise InputError("families", f"unknown families {unknown}", FAMILIES)
    default = sweep_shapes(quick, seed, gpu)
    plan: dict[str, list[Shape]] = {}
    for family in chosen:
        given = None if shapes is None else shapes.get(family)
        if given is None:
            plan[family] = default[family]
            continue
        rows = []
        for shape in given:
            m, n, k = (list(shape) + [0, 0])[:3]
            if m < 1 or n < 1 or (family == "gemm" and k < 1):
                raise InputError(f"shapes.{family}", f"bad shape {tuple(shape)}",
                                 "(m, n, k) >= 1 for gemm, (m, n) >= 1 otherwise")
            rows.append((int(m), int(n), int(k) if family == "gemm" else 0))
        plan[family] = rows
    return plan


def _check_repeats(repeats: int) -> None:
    if repeats < 1:
        raise InputError("repeats", f"must be >= 1, got {repeats}", ">= 1")


def _row(*, source_file: str, device: str, family: str, dtype: str, m: int, n: int, k: int,
         timing: str, latency_s: float) -> dict[str, Any]:
    flops, nbytes = family_cost(family, m, n, k, bytes_per_element(dtype))
    row: dict[str, Any] = dict.fromkeys(STORE_COLUMNS, 0.0)
    row.update(source="local", source_file=source_file, split="", device=device, family=family,
               op=_OP_NAMES[family], dtype=dtype, weight_dtype=dtype, kv_dtype="", b=1.0,
               m=float(m), n=float(n), k=float(k), flops=flops, bytes=nbytes, timing=timing,
               latency_s=float(latency_s))
    return row


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return check_measurements(pd.DataFrame(rows, columns=list(STORE_COLUMNS)), "sweep")


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep: `rows`, the rows timed before it (store schema), of `planned`;
    `path`, where a caller saved them (None: nowhere). Still a KeyboardInterrupt: a caller
    that only stops needs nothing new."""

    def __init__(self, rows: pd.DataFrame, planned: int, path: Path | None = None) -> None:
        super().__init__(f"{len(rows)} of {planned} rows timed")
        self.rows, self.planned, self.path = rows, planned, path


def _timed(cases: Sequence[Callable[[], dict[str, Any]]], progress: ProgressFn | None
           ) -> pd.DataFrame:
    """Each case's row, in order, `progress(done, total)` after each; Ctrl-C raises
    SweepInterrupted with the rows finished before it."""
    rows: list[dict[str, Any]] = []
    try:
        for case in cases:
            rows.append(case())
            if progress is not None:
                progress(len(rows), len(cases))
    except KeyboardInterrupt:
        raise SweepInterrupted(_frame(rows), len(cases)) from None
    return _frame(rows)


# ---------------------------------------------------------------- CPU (numpy)


def blas_description() -> str:
    """numpy's version and BLAS, e.g. 'numpy 2.1, OpenBLAS 0.3.27 (Haswell)'."""
    numpy_version = ".".join(np.__version__.split(".")[:2])
    blas = None
    try:
        from threadpoolctl import threadpool_info

        for pool in threadpool_info():
            if pool.get("user_api") == "blas":
                blas = f"{pool.get('internal_api', 'blas')} {pool.get('version') or ''}".strip()
                if pool.get("architecture"):
                    blas += f" ({pool['architecture']})"
                break
    except ImportError:
        pass
    if blas is None:
        try:
            info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
            blas = f"{info.get('name', 'blas')} {info.get('version', '')}".strip()
        except Exception:  # numpy < 1.25 has no mode="dicts": name what we cannot see
            blas = "BLAS unknown"
    return f"numpy {numpy_version}, {blas}"


def _time_cpu(fn: Callable[[], object], repeats: int) -> float:
    """Median seconds per call: one warm-up call, then `repeats` timed repeats."""
    start = time.perf_counter_ns()
    fn()  # warm-up (also sizes the inner loop)
    once = max(time.perf_counter_ns() - start, 1)
    inner = max(1, min(_MAX_INNER, math.ceil(_MIN_REPEAT_NS / once)))
    return _median_ns(fn, repeats, inner) / 1e9


def _cpu_kernel(family: str, m: int, n: int, k: int,
                rng: np.random.Generator) -> Callable[[], object]:
    """A zero-argument numpy kernel on seeded random fp32 data, outputs preallocated."""
    f32 = np.float32

    def rand(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape, dtype=f32)

    if family == "gemm":
        a, b, c = rand(m, k), rand(k, n), np.empty((m, n), dtype=f32)
        return lambda: np.matmul(a, b, out=c)
    x, out = rand(m, n), np.empty((m, n), dtype=f32)
    if family == "elementwise":
        y = rand(m, n)
        return lambda: np.add(x, y, out=out)
    if family == "activation":
        tmp, c0, c1 = np.empty((m, n), dtype=f32), f32(math.sqrt(2 / math.pi)), f32(0.044715)
        one, half = f32(1), f32(0.5)

        def gelu() -> None:  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
            np.multiply(x, x, out=tmp)
            np.multiply(tmp, c1, out=tmp)
            np.add(tmp, one, out=tmp)
            np.multiply(tmp, x, out=tmp)
            np.multiply(tmp, c0, out=tmp)
            np.tanh(tmp, out=tmp)
            np.add(tmp, one, out=tmp)
            np.multiply(tmp, x, out=out)
            np.multiply(out, half, out=out)

        return gelu
    if family == "softmax":
        row = np.empty((m, 1), dtype=f32)

        def softmax() -> None:
            np.max(x, axis=-1, keepdims=True, out=row)
            np.subtract(x, row, out=out)
            np.exp(out, out=out)
            np.sum(out, axis=-1, keepdims=True, out=row)
            np.divide(out, row, out=out)

        return softmax
    if family == "norm":
        gamma, beta, row = rand(n), rand(n), np.empty((m, 1), dtype=f32)
        sq, eps = np.empty((m, n), dtype=f32), f32(1e-5)

        def layernorm() -> None:
            np.mean(x, axis=-1, keepdims=True, out=row)
            np.subtract(x, row, out=out)
            np.square(out, out=sq)
            np.mean(sq, axis=-1, keepdims=True, out=row)
            np.add(row, eps, out=row)
            np.sqrt(row, out=row)
            np.divide(out, row, out=out)
            np.multiply(out, gamma, out=out)
            np.add(out, beta, out=out)

        return layernorm
    raise InputError("family", f"unknown family {family!r}", FAMILIES)


def _cpu_row(family: str, shape: Shape, rng: np.random.Generator, repeats: int,
             source_file: str) -> dict[str, Any]:
    """One shape's kernel built on seeded data and timed: its store row."""
    m, n, k = shape
    latency = _time_cpu(_cpu_kernel(family, m, n, k, rng), repeats)
    return _row(source_file=source_file, device=CPU_DEVICE_NAME, family=family, dtype="fp32",
                m=m, n=n, k=k, timing="cpu_wallclock", latency_s=latency)


def _cpu_sweep(plan: dict[str, list[Shape]], repeats: int, seed: int,
               progress: ProgressFn | None = None) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    source_file = f"perfcast measure ({blas_description()}, 1 thread)"
    return _timed([partial(_cpu_row, family, shape, rng, repeats, source_file)
                   for family, shapes in plan.items() for shape in shapes], progress)


def _sweep_in_single_thread_subprocess(plan: dict[str, list[Shape]], repeats: int,
                                       seed: int) -> pd.DataFrame:
    """Without threadpoolctl: rerun the sweep in a fresh interpreter whose BLAS starts with the
    thread-count variables set to 1, and read its rows back as JSON."""
    env = dict(os.environ, **dict.fromkeys(THREAD_ENV_VARS, "1"))
    code = ("import json, sys; from perfcast.measure._harness import _cpu_sweep; "
            "a = json.load(sys.stdin); "
            "p = {f: [tuple(s) for s in v] for f, v in a['plan'].items()}; "
            "df = _cpu_sweep(p, a['repeats'], a['seed']); "
            "sys.stdout.write(df.to_json(orient='split', double_precision=15))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          input=json.dumps({"plan": plan, "repeats": repeats, "seed": seed}),
                          check=False)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"single-thread sweep subprocess failed: {tail[0]}")
    return _frame(pd.read_json(StringIO(done.stdout), orient="split").to_dict("records"))


def run_cpu_sweep(quick: bool = False, repeats: int = 5, seed: int = 0,
                  families: Iterable[str] | None = None,
                  shapes: Mapping[str, Sequence[Sequence[int]]] | None = None,
                  progress: ProgressFn | None = None) -> pd.DataFrame:
    """Time the perfcast op families with numpy on one CPU thread; rows in STORE_COLUMNS.

    Every row is fp32 on device 'local-cpu', timing 'cpu_wallclock': the median over `repeats`
    of the mean per-call wall time (`time.perf_counter_ns`, kernels called back to back for at
    least 0.2 ms per repeat) after one warm-up call. BLAS is held to one thread with
    threadpoolctl (or, without it, by running in a subprocess with OMP/OPENBLAS/MKL_NUM_THREADS
    = 1). `families` and `shapes` ({family: [(m, n, k), ...]}) narrow the sweep; by default it
    runs `sweep_shapes(quick, seed)`. Quick: ~5 s on one core; full: ~1-2 minutes.
    `progress(done, total)` is called after each row (in the subprocess fallback, once at
    the end); Ctrl-C raises SweepInterrupted with the rows timed so far (none in the
    fallback, whose child is stopped too)."""
    _check_repeats(repeats)
    plan = _select(families, shapes, quick, seed, gpu=False)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        planned = sum(len(v) for v in plan.values())
        try:
            rows = _sweep_in_single_thread_subprocess(plan, repeats, seed)
        except KeyboardInterrupt:
            raise SweepInterrupted(_frame([]), planned) from None
        if progress is not None:
            progress(len(rows), planned)
        return rows
    with threadpool_limits(limits=1):
        return _cpu_sweep(plan, repeats, seed, progress)
