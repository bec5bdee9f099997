"""Timing the kernel cases (perfcast.measure._gpu_cases) on a GPU with torch, GPU time apart
from launch time, and on torch's CPU with the same cases.

On a GPU each case is captured as a CUDA graph of `calls` back-to-back calls over rotated
input copies (enough copies that they outgrow twice the L2 cache, so weights come from
memory as they do in a model) and the graph's replays are timed with CUDA events: GPU time
per call with no launch or host cost (timing 'cuda_graph'). The smallest cases of each kind
are also called eagerly back to back between events (timing 'eager': dispatch and launch
included), so a fit sees the launch term separately from GPU time
(perfcast.kernels._physics.FamilyParams.launch_s is per timing method).

The device sits behind `DeviceBackend` (synchronize, graph capture and replay, elapsed time):
`CudaBackend` is the real one; `FakeDeviceBackend` replays the captured callable on the CPU
and times it with perf_counter, so tests drive the CUDA code path without a GPU.

Budget on one H100 (`estimate_sweep_s`: cases x (2 + repeats) replays of `calls` calls at
the shipped model's kernel times, plus ~30 ms of host work a case, plus the eager pass):
quick 217 cases + 56 eager rows, ~10 s; full 1,077 + 56, ~45 s. At 0.1 s of host work a
case they would take ~30 s and ~2 min: inside the 60 s / 5 min budgets either way. NCCL
collectives (> 1 GPU) add a process-group start and 3 x 9 (quick 3 x 5) message sizes.
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from perfcast.errors import InputError
from perfcast.measure._cpu import CPU_DEVICE_NAME
from perfcast.measure._gpu_cases import (
    SHAPE_FIELDS,
    KernelCase,
    capture_graph,
    kernel_cases,
    runnable,
)
from perfcast.measure._harness import SweepInterrupted, _check_repeats, _frame, _timed
from perfcast.measure._schema import STORE_COLUMNS
from perfcast.measure._torch_cpu import _import_torch, _OneThread, _prime_allocator, time_torch_call
from perfcast.progress import ProgressFn
from perfcast.specs import get_device

__all__ = ["COLLECTIVES", "CaseTiming", "CudaBackend", "DeviceBackend", "FakeDeviceBackend",
           "collective_sizes", "device_dtypes", "estimate_sweep_s", "launch_subset",
           "measure_launch_s", "rotation_copies", "run_collective_sweep", "run_gpu_sweep",
           "run_torch_sweep", "time_case"]

ROTATION_L2_MULTIPLE = 2.0  # rotated input copies outgrow this many L2 caches
MAX_COPIES = 256
MAX_ROTATION_BYTES = 2**30  # bound on one case's rotated copies (beyond its first)
TARGET_REPLAY_S = 5e-4  # GPU time of one replay: event resolution (~0.5 us) stays < 0.1%
MAX_CALLS = 256  # >= MAX_COPIES: one replay walks every copy
EAGER_PER_KIND = 2  # smallest cases per (kind, op, dtype) also timed eagerly
FP8_CAPABILITY = (8, 9)  # torch._scaled_mm's FP8 GEMMs: Ada and Hopper onwards
COLLECTIVES = ("allreduce", "allgather", "reducescatter")


# ---------------------------------------------------------------- backends


class DeviceBackend(Protocol):
    """What the timer needs of a device."""

    name: str  # the device's own name (torch.cuda.get_device_name)
    torch_device: Any  # where tensors go
    l2_bytes: float
    capability: tuple[int, int]

    def synchronize(self) -> None: ...

    def capture(self, fn: Callable[[], None]) -> Callable[[], None]:
        """A replay of the kernels `fn` launches (a graph), captured after one warm-up."""
        ...

    def elapsed_s(self, fn: Callable[[], None]) -> float:
        """Seconds from just before `fn`'s first kernel to after its last (device clock)."""
        ...

    def release(self) -> None:
        """Free cached device memory between cases."""
        ...


class CudaBackend:
    """The current CUDA device through torch: CUDA graphs and CUDA events."""

    def __init__(self) -> None:
        import torch

        self._torch = torch
        self.torch_device = torch.device("cuda", torch.cuda.current_device())
        props = torch.cuda.get_device_properties(self.torch_device)
        self.name = torch.cuda.get_device_name(self.torch_device)
        self.l2_bytes = float(getattr(props, "L2_cache_size", 0) or 50e6)
        self.capability = tuple(torch.cuda.get_device_capability(self.torch_device))
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def synchronize(self) -> None:
        self._torch.cuda.synchronize(self.torch_device)

    def capture(self, fn: Callable[[], None]) -> Callable[[], None]:
        return capture_graph(self._torch, fn)

    def elapsed_s(self, fn: Callable[[], None]) -> float:
        self._start.record()
        fn()
        self._end.record()
        self._end.synchronize()
        return self._start.elapsed_time(self._end) / 1e3

    def release(self) -> None:
        self._torch.cuda.empty_cache()


@dataclass
class FakeDeviceBackend:
    """A CPU double of a GPU for tests: 'captures' by keeping the callable, replays it on the
    CPU, times with perf_counter (or reports `fixed_elapsed_s` for every timed run), and
    counts captures, replays and timed runs."""

    name: str = "NVIDIA H100 80GB HBM3"
    l2_bytes: float = 50e6
    capability: tuple[int, int] = (9, 0)
    fixed_elapsed_s: float | None = None
    captures: int = 0
    replays: int = 0
    timed_runs: int = 0
    torch_device: Any = field(default="cpu")

    def synchronize(self) -> None:
        return None

    def capture(self, fn: Callable[[], None]) -> Callable[[], None]:
        fn()  # the warm-up a real capture does
        self.captures += 1

        def replay() -> None:
            self.replays += 1
            fn()

        return replay

    def elapsed_s(self, fn: Callable[[], None]) -> float:
        self.timed_runs += 1
        start = time.perf_counter()
        fn()
        took = time.perf_counter() - start
        return took if self.fixed_elapsed_s is None else self.fixed_elapsed_s

    def release(self) -> None:
        return None


# ---------------------------------------------------------------- timing one case


def rotation_copies(input_bytes: float, l2_bytes: float) -> int:
    """Input copies to rotate through so that together they exceed ROTATION_L2_MULTIPLE x the
    L2 cache (each call then reads its inputs from memory), at most MAX_COPIES and at most
    MAX_ROTATION_BYTES beyond the first copy."""
    if input_bytes <= 0:
        return 1
    want = math.ceil(ROTATION_L2_MULTIPLE * l2_bytes / input_bytes)
    cap = 1 + int(MAX_ROTATION_BYTES // input_bytes)
    return max(1, min(want, MAX_COPIES, cap))


def _input_bytes(inputs: tuple) -> float:
    return float(sum(t.numel() * t.element_size() for t in inputs if hasattr(t, "numel")))


@dataclass(frozen=True)
class CaseTiming:
    """Seconds per call of one case by one timing method, with the calls per timed run and
    the input copies they rotated through."""

    seconds: float
    calls: int
    copies: int


def time_case(case: KernelCase, backend: DeviceBackend, timing: str = "cuda_graph",
              repeats: int = 5, gen: Any = None) -> CaseTiming:
    """`case` timed on `backend`: 'cuda_graph' captures `calls` back-to-back calls over
    rotated input copies and times replays (after a warm-up replay); 'eager' times the same
    calls launched one by one. Seconds per call = elapsed / calls, median of `repeats`."""
    _check_repeats(repeats)
    if timing not in ("cuda_graph", "eager"):
        raise InputError("timing", f"unknown timing {timing!r}", ["cuda_graph", "eager"])
    torch = _import_torch()
    gen = gen if gen is not None else torch.Generator(device=backend.torch_device)
    kernel = case.build(backend.torch_device, gen)
    with torch.no_grad(), kernel.context():
        first = kernel.inputs()
        n_copies = rotation_copies(_input_bytes(first), backend.l2_bytes)
        copies = [first] + [kernel.inputs() for _ in range(n_copies - 1)]
        kernel.call(first)  # warm-up: library heuristics, lazy initialisation
        backend.synchronize()
        once_s = backend.elapsed_s(lambda: kernel.call(first))
        calls = min(MAX_CALLS, max(n_copies, math.ceil(TARGET_REPLAY_S / max(once_s, 1e-9))))

        def run() -> None:
            for i in range(calls):
                kernel.call(copies[i % n_copies])

        if timing == "cuda_graph":
            run = backend.capture(run)
        run()  # warm-up replay (or eager pass)
        backend.synchronize()
        samples = [backend.elapsed_s(run) / calls for _ in range(repeats)]
    return CaseTiming(statistics.median(samples), calls, n_copies)


def launch_subset(cases: Sequence[KernelCase], per_kind: int = EAGER_PER_KIND
                  ) -> set[int]:
    """Indices of the cases also timed eagerly: the `per_kind` smallest (FLOPs + bytes) of
    each (kind, op, dtype), where launch and dispatch dominate."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, case in enumerate(cases):
        groups.setdefault((case.kind, case.op, case.dtype), []).append(i)
    return {i for idx in groups.values()
            for i in sorted(idx, key=lambda j: cases[j].work)[:per_kind]}


def measure_launch_s(backend: DeviceBackend | None = None, repeats: int = 7,
                     calls: int = 1000) -> float:
    """Median seconds per eager launch of one tiny kernel (an in-place add on one element),
    launched back to back: the host's cost per kernel (Python, ATen dispatch, CUDA launch)
    for the device spec's `kernel_launch_overhead_s`."""
    _check_repeats(repeats)
    backend = backend if backend is not None else _cuda_backend()
    torch = _import_torch()
    x = torch.zeros(1, device=backend.torch_device)

    def run() -> None:
        for _ in range(calls):
            x.add_(1.0)

    run()
    backend.synchronize()
    return statistics.median(backend.elapsed_s(run) / calls for _ in range(repeats))


def device_dtypes(backend: DeviceBackend) -> set[str]:
    """The dtypes worth timing on `backend`: those its catalog spec has a peak for (a row
    the kernel model cannot price is no use to a fit), else by compute capability (bf16 and
    TF32 from sm 8.0, FP8 from sm 8.9); FP8 also needs torch's float8 types."""
    torch = _import_torch()
    cap = tuple(backend.capability)
    by_cap = {"fp32", "fp16"} | ({"bf16", "tf32"} if cap >= (8, 0) else set()) | (
        {"fp8"} if cap >= FP8_CAPABILITY else set())
    try:
        usable = {str(d) for d in get_device(backend.name).dtypes} | {"fp32"}
    except InputError:
        usable = by_cap
    if not hasattr(torch, "float8_e4m3fn") or cap < FP8_CAPABILITY:
        usable.discard("fp8")
    return usable


# ---------------------------------------------------------------- rows


def _gpu_device_name(raw: str) -> str:
    """The catalog name of torch's GPU name when the catalog resolves it, else the raw name."""
    try:
        return get_device(raw).name
    except InputError:
        return raw


def _case_row(case: KernelCase, *, device: str, timing: str, latency_s: float,
              source_file: str) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(STORE_COLUMNS, 0.0)
    row.update(source="local", source_file=source_file, split="", device=device,
               family=case.family, op=case.op, dtype=case.dtype, weight_dtype=case.dtype,
               timing=timing, latency_s=float(latency_s), **case.coords)
    return row


def _gpu_row(case: KernelCase, timing: str, backend: DeviceBackend, gen: Any, repeats: int,
             device: str, source_file: str, release: bool) -> dict[str, Any]:
    seconds = time_case(case, backend, timing, repeats, gen).seconds
    if release:  # the last of its kind, or a big one: free the memory it cached
        backend.release()
    return _case_row(case, device=device, timing=timing, latency_s=seconds,
                     source_file=source_file)


# ---------------------------------------------------------------- sweeps


def _cuda_backend() -> CudaBackend:
    try:
        import torch
    except ImportError:
        raise InputError("device", "cuda measurements need PyTorch with CUDA (torch is not "
                         "installed)", ["cpu"]) from None
    if not torch.cuda.is_available():
        raise InputError("device", "torch sees no CUDA GPU", ["cpu"])
    return CudaBackend()


def _source_file(backend: DeviceBackend) -> str:
    torch = _import_torch()
    cuda = getattr(torch.version, "cuda", None) or "none"
    return (f"perfcast measure (torch {torch.__version__}, CUDA {cuda}, {backend.name}; "
            "CUDA-graph replays over inputs rotated past 2x L2, eager for the launch subset)")


def _kernel_families(families: Iterable[str] | None) -> tuple[list[str] | None, bool]:
    """(kernel families or None for all, whether collectives are asked for)."""
    if families is None:
        return None, True
    chosen = list(families)
    comm = [f for f in chosen if f in COLLECTIVES]
    return [f for f in chosen if f not in COLLECTIVES], bool(comm)


# The old sweep's {family: [(m, n, k)]} shapes, as the kinds it timed.
LEGACY_KINDS = {"gemm": "linear", "elementwise": "add", "activation": "gelu",
                "softmax": "softmax", "norm": "layer_norm"}


def _kind_shapes(shapes: Mapping[str, Sequence[Sequence[int]]] | None
                 ) -> dict[str, list[tuple[int, ...]]] | None:
    """`shapes` keyed by kind; the old harness's family keys (LEGACY_KINDS, (m, n, k) with
    k = 0 for vector families) become the kinds it timed, with the shape cut to the kind's."""
    if shapes is None:
        return None
    out: dict[str, list[tuple[int, ...]]] = {}
    for key, given in shapes.items():
        kind = LEGACY_KINDS.get(key, key)
        size = len(SHAPE_FIELDS.get(kind, ()))
        out.setdefault(kind, []).extend(
            tuple(s)[:size] if key in LEGACY_KINDS and len(s) > size and not any(s[size:])
            else tuple(s) for s in given)
    return out


def run_gpu_sweep(quick: bool = False, repeats: int = 5, seed: int = 0,
                  families: Iterable[str] | None = None, progress: ProgressFn | None = None,
                  *, shapes: Mapping[str, Sequence[Sequence[int]]] | None = None,
                  dtypes: Iterable[str] | None = None, backend: DeviceBackend | None = None,
                  collectives: bool = True, gemm_dtypes: Sequence[str] | None = None,
                  vector_dtypes: Sequence[str] | None = None) -> pd.DataFrame:
    """Time the kernel cases (`kernel_cases('cuda', quick, seed, families, dtypes, shapes)`)
    on the current CUDA GPU with torch (imported lazily; not a perfcast dependency); rows in
    STORE_COLUMNS. Every runnable case gets a 'cuda_graph' row (GPU time per call: graph
    replays over inputs rotated past the L2 cache, median of `repeats`); the smallest cases of
    each kind also an 'eager' row (launch and dispatch included). FP8 runs on sm >= 8.9 only;
    attention through the SDPA backends that take the configuration. The device column is
    the catalog name when `get_device` resolves the GPU's name, else the raw name. With more
    than one GPU visible and `collectives`, NCCL all-reduce / all-gather / reduce-scatter
    rows follow (`run_collective_sweep`). `backend` replaces the CUDA device (tests pass a
    FakeDeviceBackend). The old sweep's arguments still work: family-keyed `shapes`
    (LEGACY_KINDS) and `gemm_dtypes` / `vector_dtypes` (joined into `dtypes`). InputError
    (field 'device') without torch or a GPU.
    `progress(done, total)` after each row; Ctrl-C raises SweepInterrupted with the rows
    timed so far."""
    _check_repeats(repeats)
    kernel_fams, want_comm = _kernel_families(families)
    if gemm_dtypes is not None or vector_dtypes is not None:
        dtypes = {*(dtypes or ()), *(gemm_dtypes or ()), *(vector_dtypes or ())}
    shapes = _kind_shapes(shapes)
    real = backend is None
    backend = backend if backend is not None else _cuda_backend()
    torch = _import_torch()
    usable = device_dtypes(backend)
    cases = kernel_cases("cuda", quick, seed, kernel_fams, dtypes, shapes,
                         half="bf16" if "bf16" in usable else "fp16")
    cases = [c for c in cases if c.dtype in usable
             and runnable(c, backend.torch_device, fp8="fp8" in usable)]
    eager = launch_subset(cases)
    device, source_file = _gpu_device_name(backend.name), _source_file(backend)
    gen = torch.Generator(device=backend.torch_device).manual_seed(seed)
    plan = []
    for i, case in enumerate(cases):
        last = i == len(cases) - 1 or cases[i + 1].kind != case.kind
        timings = ["cuda_graph"] + (["eager"] if i in eager else [])
        for j, timing in enumerate(timings):
            plan.append(partial(_gpu_row, case, timing, backend, gen, repeats, device,
                                source_file, last and j == len(timings) - 1))
    sizes = collective_sizes(quick) if (real and collectives and want_comm
                                        and torch.cuda.device_count() > 1) else []
    total = len(plan) + len(sizes) * len(COLLECTIVES)
    rows = _timed(plan, None if progress is None else
                  (lambda done, _n: progress(done, total)))
    if not sizes:
        return rows
    try:
        comm = run_collective_sweep(repeats=repeats, sizes=sizes)
    except KeyboardInterrupt:
        raise SweepInterrupted(rows, total) from None
    if progress is not None:
        progress(total, total)
    return _frame(rows.to_dict("records") + comm.to_dict("records"))


def run_torch_sweep(device: str = "cpu", quick: bool = False, repeats: int = 5, seed: int = 0,
                    families: Iterable[str] | None = None, progress: ProgressFn | None = None,
                    *, shapes: Mapping[str, Sequence[Sequence[int]]] | None = None,
                    dtypes: Iterable[str] | None = None) -> pd.DataFrame:
    """The kernel cases through torch on `device`: 'cuda' is `run_gpu_sweep`; 'cpu' times
    `kernel_cases('cpu', ...)` (fp32, CPU-sized shapes) on one CPU thread with the torch CPU
    timer (`time_torch_call`: median per-call wall time after warm-up; timing
    'cpu_wallclock', device 'local-cpu'). The whole GPU flow on torch's CPU: same cases, same
    op names and coordinates, same row builder. `progress(done, total)` after each row;
    Ctrl-C raises SweepInterrupted with the rows timed so far."""
    if device == "cuda":
        return run_gpu_sweep(quick, repeats, seed, families, progress, shapes=shapes,
                             dtypes=dtypes)
    if device != "cpu":
        raise InputError("device", f"unknown device {device!r}", ["cpu", "cuda"])
    _check_repeats(repeats)
    torch = _import_torch()
    kernel_fams, _ = _kernel_families(families)
    cases = kernel_cases("cpu", quick, seed, kernel_fams, dtypes, shapes)
    cpu = torch.device("cpu")
    cases = [c for c in cases if runnable(c, cpu, fp8=False)]
    source_file = f"perfcast measure (torch {torch.__version__} eager, 1 thread, kernel cases)"
    with _OneThread(), torch.no_grad():
        _prime_allocator()
        gen = torch.Generator().manual_seed(seed)
        return _timed([partial(_cpu_row, case, gen, repeats, source_file) for case in cases],
                      progress)


def _cpu_row(case: KernelCase, gen: Any, repeats: int, source_file: str) -> dict[str, Any]:
    kernel = case.build("cpu", gen)
    with kernel.context():
        inputs = kernel.inputs()
        seconds = time_torch_call(lambda: kernel.call(inputs), repeats)
    return _case_row(case, device=CPU_DEVICE_NAME, timing="cpu_wallclock", latency_s=seconds,
                     source_file=source_file)


# ---------------------------------------------------------------- budget


# Host seconds per case besides its kernels (inputs, capture, Python), per call issued
# while capturing or launching, and the launch floor of an eager call: estimates for the
# budget, not measurements.
_CASE_OVERHEAD_S, _HOST_CALL_S, _EAGER_FLOOR_S = 0.03, 2e-5, 6e-6


def estimate_sweep_s(cases: Sequence[KernelCase], device: str = "h100-sxm",
                     repeats: int = 5) -> float:
    """Rough wall seconds `run_gpu_sweep` spends on `cases` on `device`: per case, kernel time
    (the shipped kernel model's cuda_graph forecast) x calls x (capture warm-up + warm-up
    replay + repeats), plus host time to build inputs and issue the captured calls, and the
    eager pass for the launch subset. The budget check, not a measurement."""
    from perfcast.kernels import PhysicsModel, measurement_ops, shipped_calibration

    if not cases:
        return 0.0
    spec = get_device(device)
    rows = pd.DataFrame([_case_row(c, device=spec.name, timing="cuda_graph", latency_s=1.0,
                                   source_file="") for c in cases])
    kernel_s = PhysicsModel(shipped_calibration()).kernel_times(measurement_ops(rows), spec)
    eager = launch_subset(cases)
    total = 0.0
    for i, (case, t) in enumerate(zip(cases, kernel_s, strict=True)):
        copies = rotation_copies(float(case.coords["bytes"]), spec.l2_bytes or 50e6)
        calls = min(MAX_CALLS, max(copies, math.ceil(TARGET_REPLAY_S / (t + _EAGER_FLOOR_S))))
        runs = 2 + repeats  # capture warm-up, warm-up replay, timed replays
        total += _CASE_OVERHEAD_S + calls * _HOST_CALL_S * 2 + (runs * calls + 2) * t
        if i in eager:
            total += _CASE_OVERHEAD_S + (1 + repeats) * calls * max(t, _EAGER_FLOOR_S)
    return float(total)


# ---------------------------------------------------------------- NCCL collectives (> 1 GPU)


def collective_sizes(quick: bool = False) -> list[int]:
    """Message bytes per collective: 4 KiB to 256 MiB (quick: a factor 16 apart, else 4)."""
    step, sizes = (16 if quick else 4), [4096]
    while sizes[-1] * step <= 2**28:
        sizes.append(sizes[-1] * step)
    return sizes


def _collective_row(kind: str, message_bytes: int, gpus: int, seconds: float, device: str,
                    source_file: str) -> dict[str, Any]:
    """A comm-family row: m = message bytes (the full buffer: all-reduce's, all-gather's
    output, reduce-scatter's input), n = GPUs, bytes = message bytes (perfcast.ops)."""
    row: dict[str, Any] = dict.fromkeys(STORE_COLUMNS, 0.0)
    row.update(source="local", source_file=source_file, split="", device=device, family=kind,
               op="nccl", dtype="bf16", weight_dtype="bf16", kv_dtype="", b=1.0,
               m=float(message_bytes), n=float(gpus), bytes=float(message_bytes),
               timing="eager", latency_s=float(seconds))
    return row


_COLLECTIVE_CALLS = 20  # back-to-back calls per timed run


def _call_n(call: Callable[[], object], n: int) -> None:
    for _ in range(n):
        call()


def _collective_call(kind: str, full: Any, part: Any) -> Callable[[], object]:
    """The torch.distributed call of `kind` on the full buffer and one rank's part."""
    import torch.distributed as dist

    if kind == "allreduce":
        return partial(dist.all_reduce, full)
    if kind == "allgather":
        return partial(dist.all_gather_into_tensor, full, part)
    return partial(dist.reduce_scatter_tensor, part, full)


def _collective_worker(rank: int, world: int, store: str, sizes: list[int], repeats: int,
                       out: str) -> None:  # pragma: no cover - needs several GPUs
    """One rank: NCCL through torch.distributed, each collective called back to back between
    CUDA events (per-call mean, median of repeats); rank 0 writes the rows as JSON."""
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"file://{store}", rank=rank, world_size=world)
    backend, rows = CudaBackend(), []
    name = _gpu_device_name(backend.name)
    source = _source_file(backend) + f", NCCL {torch.cuda.nccl.version()}"
    for kind in COLLECTIVES:
        for size in sizes:
            part = torch.empty(max(size // 2 // world, 1), dtype=torch.bfloat16,
                               device=backend.torch_device)
            full = torch.empty(part.numel() * world, dtype=torch.bfloat16,
                               device=backend.torch_device)
            run = partial(_call_n, _collective_call(kind, full, part), _COLLECTIVE_CALLS)
            run()
            dist.barrier()
            seconds = statistics.median(backend.elapsed_s(run) / _COLLECTIVE_CALLS
                                        for _ in range(repeats))
            rows.append(_collective_row(kind, size, world, seconds, name, source))
    if rank == 0:
        Path(out).write_text(json.dumps(rows))
    dist.destroy_process_group()


def run_collective_sweep(repeats: int = 5, sizes: Sequence[int] | None = None,
                         gpus: int | None = None) -> pd.DataFrame:  # pragma: no cover
    """NCCL all-reduce, all-gather and reduce-scatter over `sizes` message bytes on `gpus`
    visible GPUs (default all), one spawned process per GPU, joined through a file store in
    a temporary directory; rows in the comm families (timing 'eager'). InputError with
    fewer than two GPUs."""
    torch = _import_torch()
    world = gpus or (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    if world < 2:
        raise InputError("device", f"collectives need >= 2 GPUs, torch sees {world}", ">= 2")
    _check_repeats(repeats)
    sizes = list(sizes or collective_sizes())
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "rows.json")
        torch.multiprocessing.spawn(_collective_worker, nprocs=world, args=(
            world, str(Path(tmp) / "store"), sizes, repeats, out))
        rows = json.loads(Path(out).read_text())
    return _frame(rows)
