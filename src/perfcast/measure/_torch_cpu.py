"""Eager PyTorch kernels on one CPU thread, timed into measurement-store rows.

The op names, families and shape conventions are the eager-kernel vocabulary of perfcast's
eager op tables (`perfcast.ops.cnn_ops`, the eager transformer tables): `linear` (addmm),
`bmm`, `conv` as an implicit GEMM, binary and tensor-scalar elementwise ops, `copy` (a
permuted `.contiguous()`), pooling, activations, `softmax`, `ln`, `bn` and `embedding`. Each
kernel is called the way a model calls it (allocating its output, on fp32 tensors), so its
wall time includes torch's host dispatch and the allocator, as it does inside a model.

torch is imported inside the functions: perfcast itself never needs it.
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from perfcast.errors import InputError, close_matches
from perfcast.measure._cpu import CPU_DEVICE_NAME
from perfcast.measure._harness import _check_repeats, _odd_size, _timed
from perfcast.measure._schema import STORE_COLUMNS
from perfcast.progress import ProgressFn

__all__ = ["TORCH_EXTRA", "TORCH_OPS", "measure_torch_dispatch_s", "run_torch_cpu_sweep",
           "time_torch_call", "torch_kernel", "torch_sweep_shapes"]

TORCH_EXTRA = "torch"  # pip install 'perfcast[torch]'
ELEM_BYTES = 4.0  # fp32

# op -> family (the eager-kernel vocabulary)
TORCH_OPS: dict[str, str] = {
    "linear": "gemm", "bmm": "gemm", "conv": "conv",
    "add": "elementwise", "sub": "elementwise", "mul": "elementwise", "div": "elementwise",
    "where": "elementwise", "addu": "elementwise", "mulu": "elementwise",
    "divu": "elementwise", "powu": "elementwise", "copy": "elementwise",
    "maxpool": "elementwise", "avgpool": "elementwise",
    "relu": "activation", "gelu": "activation", "tanh": "activation", "silu": "activation",
    "softmax": "softmax", "ln": "norm", "bn": "norm", "embedding": "embedding",
    # what the hf-transformers stack's step adds: fused attention (a one-token query:
    # attn_decode, see `family_of`), and the training kernels
    "sdpa": "attn_prefill", "dropout": "elementwise", "sum": "elementwise",
    "fill": "elementwise", "adam": "elementwise",
}
# ops whose sweep shape is not (m rows, n width): the arity of their shape tuples
SHAPE_ARITY = {"linear": 3, "bmm": 4, "conv": 6, "sdpa": 4}
_ADAM_STATE = 4  # fp32 tensors Adam reads per parameter (p, grad, exp_avg, exp_avg_sq)
_ADAM_WRITES = 3  # and writes (p, exp_avg, exp_avg_sq)
_ADAM_FLOPS = 12.0  # per parameter (perfcast.ops' optimizer row)
# FLOPs per element of the vector ops (the vocabulary's counts: 1 unless listed; the
# activation kernels count 8, tanh 1 as one of gelu_new's eight kernels)
_FLOPS_PER_ELEM = {"gelu": 8.0, "relu": 8.0, "silu": 8.0, "softmax": 5.0, "ln": 5.0,
                   "bn": 2.0, "embedding": 0.0}
_BINARY = ("add", "sub", "mul", "div")  # read two full tensors
_SCALAR = ("addu", "mulu", "divu", "powu")
_POOLS = ("maxpool", "avgpool", "bn")  # shape (channels, size): a [1, C, size, size] input
_BN_PARAMS_PER_CHANNEL = 4
_COPY_HEAD_DIM = 64

# Each timed repeat calls the kernel back to back for at least this long; warm-up calls run
# for at least _WARM_NS (first calls of a new size fault their pages in: not steady state).
_MIN_REPEAT_NS = 200_000
_WARM_NS = 5_000_000
_MAX_WARM, _MAX_INNER = 8, 10_000
_UNDISTURBED, _MAX_TRIES = 0.93, 4  # thread CPU / wall of an undisturbed repeat; retries
_PRIME_BYTES = 30 * 2**20  # allocator priming (see _prime_allocator)
_MAX_COPIES = 64  # weight copies a cold `linear` cycles through, at most


# ---------------------------------------------------------------- shapes


def _grid(a: Sequence[int], b: Sequence[int]) -> list[tuple[int, ...]]:
    return [(x, y) for x in a for y in b]


def torch_sweep_shapes(quick: bool = False, seed: int = 0) -> dict[str, list[tuple[int, ...]]]:
    """Shapes per op, seeded and deterministic: a grid over what CNNs and small
    transformers run (tokens x hidden GEMMs, vocabulary-wide heads, attention BMMs, 1x1 /
    3x3 / 7x7 convs at 7-224 pixels) plus sizes that are not powers of two.

    linear (m, n, k); bmm (b, m, n, k); conv (batch, c_in, size, c_out, kernel, stride);
    bn / maxpool / avgpool (channels, size); every other op (m rows, n width)."""
    rng = np.random.default_rng(seed)
    odd = lambda lo, hi: _odd_size(rng, lo, hi)  # noqa: E731
    tokens = [1, 32, 128] if quick else [1, 8, 32, 128, 512]
    widths = [256, 768, 3072] if quick else [64, 256, 768, 1024, 3072, 4096]
    n_odd = 6 if quick else 24
    linear = [(m, n, k) for m in tokens for n in widths + [2304] for k in widths]  # 2304: QKV
    linear += [(odd(1, 1024), odd(64, 4096), odd(64, 4096)) for _ in range(n_odd)]
    heads = [(1, 768), (128, 768)] if quick else [(1, 768), (16, 1024), (128, 768), (128, 512),
                                                  (256, 1024)]
    linear += [(m, n, k) for m, k in heads for n in (32768, odd(8000, 60000))]  # vocabulary
    seqs = [32, 128, 512] if quick else [16, 64, 128, 256, 512, 1024]
    bmm = [(12, s, s, 64) for s in seqs] + [(12, s, 64, s) for s in seqs]
    bmm += [(odd(2, 32), odd(16, 1024), odd(16, 1024), odd(16, 256))
            for _ in range(4 if quick else 16)]
    conv = [(1, c, s, c, 3, 1) for c, s in ((64, 56), (128, 28), (256, 14), (512, 7))]
    conv += [(1, c, 2 * s, 2 * c, 3, 2) for c, s in ((64, 28), (128, 14), (256, 7))]
    conv += [(1, c, 2 * s, 2 * c, 1, 2) for c, s in ((64, 28), (128, 14), (256, 7))]
    conv += [(1, 3, 224, 64, 7, 2), (1, 3, 112, 32, 7, 2)]
    conv += [(1, 256, 56, 64, 1, 1), (1, 64, 56, 256, 1, 1), (1, 512, 14, 128, 1, 1)]
    if not quick:
        conv += [(2, c, s, c, 3, 1) for c, s in ((64, 56), (128, 28), (256, 14), (512, 7))]
        conv += [(1, c, s, c, 3, 1) for c, s in ((64, 28), (128, 56), (256, 28), (512, 14))]
    conv += [(1, odd(3, 512), odd(7, 112), odd(16, 512), int(rng.choice([1, 3, 3, 7])),
              int(rng.choice([1, 1, 2]))) for _ in range(6 if quick else 24)]
    sdpa = [(12, s, s, 64) for s in seqs] + [(12, 1, s, 64) for s in seqs]  # prefill, decode
    own = np.random.default_rng([seed, 1])  # its own stream: the other ops' draws stay
    sdpa += [(_odd_size(own, 2, 32), q, q + c, int(own.choice([64, 128])))
             for q, c in ((_odd_size(own, 3, 512), _odd_size(own, 3, 256))
                          for _ in range(2 if quick else 8))]
    adam = [(2**20, 1)] if quick else [(2**18, 1), (2**20, 1), (2**22, 1)]
    shapes: dict[str, list[tuple[int, ...]]] = {"linear": linear, "bmm": bmm, "conv": conv,
                                                "sdpa": sdpa, "adam": adam}
    rows = [16, 128, 1024] if quick else [1, 16, 128, 512, 1536, 4096]
    cols = [96, 768, 3072] if quick else [64, 128, 768, 3072, 12544]
    channels = [64, 256] if quick else [64, 128, 256, 512]
    sizes = [7, 28, 112] if quick else [7, 14, 28, 56, 112]
    for op in TORCH_OPS:
        if op in shapes:
            continue
        if op in _POOLS:
            grid = _grid(channels, sizes)
            grid += [(odd(3, 1024), odd(5, 112)) for _ in range(3 if quick else 8)]
        else:  # tokens x width, and CNN channels x pixels
            grid = _grid(rows, cols) + [(c, s * s) for c in channels for s in sizes]
            grid += [(odd(3, 2048), odd(32, 12544)) for _ in range(4 if quick else 8)]
        if op in ("where", "softmax", "divu"):  # attention scores: heads x seq rows, seq wide
            grid += [(h * s, s) for h in (4, 12) for s in seqs]
        if op == "copy":  # whole heads of _COPY_HEAD_DIM
            grid = [(m, max(n // _COPY_HEAD_DIM, 1) * _COPY_HEAD_DIM) for m, n in grid]
        shapes[op] = grid
    return shapes


def family_of(op: str, shape: Sequence[int]) -> str:
    """The kernel family of one sweep point: TORCH_OPS's, except a one-token `sdpa` query
    (a decode step's attention)."""
    if op == "sdpa" and shape[1] == 1:
        return "attn_decode"
    return TORCH_OPS[op]


def _attention_cost(b: int, m: int, n: int, k: int) -> tuple[float, float]:
    """(FLOPs, bytes) of causal attention of `m` new queries over `n` keys (the last m of
    them new), perfcast.ops' conventions: 4·b·k FLOPs per attended pair (QK^T and PV);
    q, k, v read and the output written once."""
    pairs = m * (n - m) + m * (m + 1) / 2
    return 4.0 * b * k * pairs, ELEM_BYTES * b * (2.0 * m * k + 2.0 * n * k)


def _plan(ops: Iterable[str] | Mapping[str, Sequence[Sequence[int]]] | None, quick: bool,
          seed: int) -> dict[str, list[tuple[int, ...]]]:
    default = torch_sweep_shapes(quick, seed)
    if ops is None:
        return default
    chosen = list(ops)
    for op in chosen:
        if op not in TORCH_OPS:
            hint = close_matches(str(op), TORCH_OPS)
            raise InputError("ops", f"unknown op {op!r}" + (
                f"; did you mean {', '.join(hint)}?" if hint else ""), TORCH_OPS)
    if not isinstance(ops, Mapping):
        return {op: default[op] for op in chosen}
    want = SHAPE_ARITY
    plan = {}
    for op, given in ops.items():
        rows = [tuple(int(v) for v in s) for s in given]
        size = want.get(op, 2)
        if any(len(s) != size or min(s) < 1 for s in rows):
            raise InputError(f"ops.{op}", f"bad shapes {rows[:3]}",
                             f"tuples of {size} positive integers")
        plan[op] = rows
    return plan


# ---------------------------------------------------------------- kernels


def _conv_out(size: int, kernel: int, stride: int) -> int:
    return (size + 2 * (kernel // 2) - kernel) // stride + 1


def _vector_cost(op: str, m: int, n: int) -> tuple[float, float]:
    """(FLOPs, bytes) of a vector op on an [m, n] tensor, by the vocabulary's conventions:
    full-size tensors read + written (a broadcast operand, LayerNorm's weights and the
    `where` mask do not count)."""
    elems = float(m) * n
    if op == "sum":  # rows summed: [m, n] read, [n] written
        return elems, ELEM_BYTES * (elems + n)
    if op == "fill":  # written only
        return 0.0, ELEM_BYTES * elems
    tensors = 3.0 if op in _BINARY else 2.0
    mask = elems if op == "dropout" else 0.0  # dropout also writes its one-byte mask
    return _FLOPS_PER_ELEM.get(op, 1.0) * elems, ELEM_BYTES * tensors * elems + mask


def _weight_copies(weight_bytes: float, cold_bytes: float) -> int:
    """Copies of a weight whose total passes `cold_bytes` (the last-level cache, say), so
    calls that cycle through them read weights from memory as a model's step does (each
    layer's weights are read once per step); 1 when `cold_bytes` is 0."""
    if cold_bytes <= 0:
        return 1
    return int(min(_MAX_COPIES, max(1, math.ceil(cold_bytes / max(weight_bytes, 1.0)) + 1)))


def torch_kernel(op: str, shape: Sequence[int], gen: Any, cold_bytes: float = 0.0
                 ) -> tuple[Callable[[], object], dict[str, float]]:
    """A zero-argument torch call for one sweep point and its store coordinates
    (b, m, n, k, flops, bytes), on seeded random fp32 data. With `cold_bytes` > 0, a
    `linear` cycles through enough weight copies to exceed that many bytes (weights read
    from memory, not cache)."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    def rand(*dims: int) -> Any:
        return torch.randn(dims, generator=gen, dtype=torch.float32)

    e = ELEM_BYTES
    if op == "linear":  # HF Conv1D / nn.Linear with bias: one addmm
        m, n, k = shape
        x, bias, weight = rand(m, k), rand(n), rand(k, n)
        # copies, not fresh draws: distinct memory is what keeps them out of the cache, and
        # a copy is a memory-speed pass where a draw took ~10x longer
        weights = itertools.cycle([weight] + [weight.clone() for _ in range(
            _weight_copies(e * k * n, cold_bytes) - 1)])
        return (lambda: torch.addmm(bias, x, next(weights))), dict(
            b=1, m=m, n=n, k=k, flops=2.0 * m * n * k, bytes=e * (m * k + k * n + m * n))
    if op == "bmm":  # matmul of [1, b, m, k] x [1, b, k, n]
        b, m, n, k = shape
        x, y = rand(1, b, m, k), rand(1, b, k, n)
        return (lambda: torch.matmul(x, y)), dict(
            b=b, m=m, n=n, k=k, flops=2.0 * b * m * n * k, bytes=e * b * (m * k + k * n + m * n))
    if op == "conv":  # conv2d without bias, padding kernel // 2 (torchvision ResNets)
        batch, c_in, size, c_out, kernel, stride = shape
        x, w = rand(batch, c_in, size, size), rand(c_out, c_in, kernel, kernel)
        out = _conv_out(size, kernel, stride)
        m, n, k = batch * out * out, c_out, c_in * kernel * kernel
        return (lambda: F.conv2d(x, w, None, stride, kernel // 2)), dict(
            b=1, m=m, n=n, k=k, flops=2.0 * m * n * k,
            bytes=e * (batch * c_in * size * size + n * k + m * n))
    if op in _POOLS:
        channels, size = shape
        x = rand(1, channels, size, size)
        m, n = channels, size * size
        if op == "bn":
            mean, var, weight, bias = rand(channels), rand(channels).abs(), rand(channels), \
                rand(channels)
            fn = lambda: F.batch_norm(x, mean, var, weight, bias, False)  # noqa: E731
            return fn, dict(b=1, m=m, n=n, k=0, flops=2.0 * m * n,
                            bytes=e * (2.0 * m * n + _BN_PARAMS_PER_CHANNEL * channels))
        if op == "maxpool":  # torchvision's stem pool: 3x3, stride 2, padding 1
            pooled = (size + 2 - 3) // 2 + 1
            fn = lambda: F.max_pool2d(x, 3, 2, 1)  # noqa: E731
            return fn, dict(b=1, m=m, n=n, k=0, flops=float(m * n),
                            bytes=e * (m * n + channels * pooled * pooled))
        fn = lambda: F.adaptive_avg_pool2d(x, 1)  # noqa: E731
        return fn, dict(b=1, m=m, n=n, k=0, flops=float(m * n), bytes=e * (m * n + channels))
    if op == "sdpa":  # [b, m, k] queries over [b, n, k] keys and values, causal
        b, m, n, k = shape
        q, keys, values = rand(b, m, k), rand(b, n, k), rand(b, n, k)
        mask = torch.ones(m, n, dtype=torch.bool).tril(n - m)
        flops, nbytes = _attention_cost(b, m, n, k)
        return (lambda: F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)), \
            dict(b=b, m=m, n=n, k=k, flops=flops, bytes=nbytes)
    m, n = shape
    if op == "adam":  # one step of Adam over m * n fp32 parameters
        return _adam_step(m * n, gen), dict(
            b=1, m=m, n=n, k=0, flops=_ADAM_FLOPS * m * n,
            bytes=ELEM_BYTES * (_ADAM_STATE + _ADAM_WRITES) * m * n)
    flops, nbytes = _vector_cost(op, m, n)
    coords = dict(b=1, m=m, n=n, k=0, flops=flops, bytes=nbytes)
    x = rand(m, n)
    if op == "dropout":  # training mode: a fresh mask each call
        return (lambda: F.dropout(x, 0.1, training=True)), coords
    if op == "sum":  # a bias or norm-weight gradient: the rows summed
        return (lambda: x.sum(0)), coords
    if op == "fill":  # a gradient zeroed in place
        return (lambda: x.zero_()), coords
    if op == "where":  # GPT-2's causal mask: [n, n] broadcast over the heads when it fits
        rows = n if m % n == 0 else m
        mask = torch.ones(rows, n, dtype=torch.bool).tril()
        fill, x3 = torch.full([], torch.finfo(torch.float32).min), x.view(m // rows, rows, n)
        return (lambda: torch.where(mask, x3, fill)), coords
    if op in _BINARY:
        y = rand(m, n)
        binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[op]
        return (lambda: binary(x, y)), coords
    if op in _SCALAR:
        scalar = {"addu": lambda: x + 1.0, "mulu": lambda: x * 0.5, "divu": lambda: x / 8.0,
                  "powu": lambda: torch.pow(x, 3.0)}
        return scalar[op], coords
    if op == "copy":  # [heads, m, d] -> [m, heads, d], made contiguous
        heads = n // _COPY_HEAD_DIM
        t = x.view(m, heads, _COPY_HEAD_DIM).permute(1, 0, 2).contiguous()
        return (lambda: t.permute(1, 0, 2).contiguous()), coords
    if op == "relu":  # torchvision's ReLU(inplace=True)
        return (lambda: torch.relu_(x)), coords
    if op == "embedding":
        table = rand(max(2048, m), n)
        ids = torch.randint(0, table.shape[0], (1, m), generator=gen)
        return (lambda: F.embedding(ids, table)), coords
    if op == "ln":
        weight, bias = rand(n), rand(n)
        return (lambda: F.layer_norm(x, (n,), weight, bias)), coords
    unary = {"gelu": lambda: F.gelu(x, approximate="tanh"), "tanh": lambda: torch.tanh(x),
             "silu": lambda: F.silu(x), "softmax": lambda: F.softmax(x, dim=-1)}
    return unary[op], coords


def _adam_step(params: int, gen: Any) -> Callable[[], object]:
    """One Adam step (torch.optim.Adam, its default single-tensor path on CPU) over one flat
    fp32 parameter with a gradient."""
    import torch

    weight = torch.nn.Parameter(torch.randn(params, generator=gen, dtype=torch.float32))
    weight.grad = torch.randn(params, generator=gen, dtype=torch.float32)
    optimizer = torch.optim.Adam([weight], lr=1e-4, foreach=False)
    return optimizer.step


# ---------------------------------------------------------------- timing


def _prime_allocator() -> None:
    """Allocate and free a large tensor a few times: glibc then serves later allocations of
    up to that size from its heap instead of fresh (page-faulting) mmaps, the steady state a
    model reaches after its first forward."""
    import torch

    for _ in range(10):
        block = torch.empty(int(_PRIME_BYTES // 4), dtype=torch.float32)
        block.fill_(0.0)
        del block


def time_torch_call(fn: Callable[[], object], repeats: int = 5) -> float:
    """Median seconds per call: warm-up calls (at least one, up to 5 ms or 8 calls), then
    repeats of back-to-back calls lasting >= 0.2 ms each, mean per call.

    On a shared machine another process can take the CPU mid-repeat: a repeat whose thread
    CPU time falls short of its wall time by more than 7% was descheduled and is redone (up
    to 4x `repeats` in all; the fastest repeat stands in if none ran undisturbed)."""
    start = time.perf_counter_ns()
    fn()
    once = max(time.perf_counter_ns() - start, 1)
    for _ in range(min(_MAX_WARM, math.ceil(_WARM_NS / once))):
        fn()
    inner = max(1, min(_MAX_INNER, math.ceil(_MIN_REPEAT_NS / once)))
    clean, every = [], []
    while len(clean) < repeats and len(every) < _MAX_TRIES * repeats:
        cpu, start = time.thread_time_ns(), time.perf_counter_ns()
        for _ in range(inner):
            fn()
        wall = time.perf_counter_ns() - start
        every.append(wall / inner)
        if time.thread_time_ns() - cpu >= _UNDISTURBED * wall:
            clean.append(wall / inner)
    return (statistics.median(clean) if clean else min(every)) / 1e9


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise InputError("backend", "the torch backend needs PyTorch, which is not installed",
                         f"pip install 'perfcast[{TORCH_EXTRA}]', or --backend numpy") from None
    return torch


class _OneThread:
    """torch (intra-op) held to one thread inside the block, restored after."""

    def __enter__(self) -> None:
        torch = _import_torch()
        self._torch, self._before = torch, torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc: object) -> None:
        self._torch.set_num_threads(self._before)


def measure_torch_dispatch_s(repeats: int = 7, inner: int = 2000) -> float:
    """Median seconds of one eager torch op on 1-element fp32 tensors (an allocating add):
    the host cost torch adds to every kernel it launches on this CPU (Python binding, ATen
    dispatch, output allocation)."""
    torch = _import_torch()
    _check_repeats(repeats)
    with _OneThread():
        x, y = torch.ones(1), torch.ones(1)
        samples = []
        for _ in range(repeats + 1):  # the first repeat warms up
            start = time.perf_counter_ns()
            for _ in range(inner):
                torch.add(x, y)
            samples.append((time.perf_counter_ns() - start) / inner)
    return statistics.median(samples[1:]) / 1e9


def _torch_row(op: str, shape: Sequence[int], gen: Any, repeats: int, source_file: str,
               cold_bytes: float = 0.0) -> dict[str, Any]:
    """One sweep point's kernel built and timed: its store row."""
    fn, coords = torch_kernel(op, shape, gen, cold_bytes)
    latency = time_torch_call(fn, repeats)
    row: dict[str, Any] = dict.fromkeys(STORE_COLUMNS, 0.0)
    row.update(source="local", source_file=source_file, split="", device=CPU_DEVICE_NAME,
               family=family_of(op, shape), op=op, dtype="fp32", weight_dtype="fp32", kv_dtype="",
               timing="cpu_wallclock", latency_s=latency,
               **{c: float(v) for c, v in coords.items()})
    return row


def run_torch_cpu_sweep(quick: bool = False, repeats: int = 5, seed: int = 0,
                        ops: Iterable[str] | Mapping[str, Sequence[Sequence[int]]] | None = None,
                        progress: ProgressFn | None = None,
                        cold_bytes: float = 0.0) -> pd.DataFrame:
    """Time the eager-vocabulary kernels with torch on one CPU thread; rows in STORE_COLUMNS
    (device 'local-cpu', fp32, timing 'cpu_wallclock': median over `repeats` of the mean
    per-call wall time, after warm-up). `ops` narrows the sweep to some op names, or gives
    {op: [shape, ...]} (shape tuples as in `torch_sweep_shapes`). Quick: ~10 s; full: about
    1-2 minutes on one core. InputError when torch is not installed. `progress(done, total)`
    is called after each row; Ctrl-C raises SweepInterrupted with the rows timed so far.
    `cold_bytes` > 0: `linear` weights are read from memory (see `torch_kernel`), as in a
    model's step, whose layers each read their own weights once."""
    _check_repeats(repeats)
    plan = _plan(ops, quick, seed)
    torch = _import_torch()
    source_file = f"perfcast measure (torch {torch.__version__} eager, 1 thread)"
    with _OneThread():
        _prime_allocator()
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            return _timed([partial(_torch_row, op, shape, gen, repeats, source_file,
                                   cold_bytes) for op, shapes in plan.items()
                           for shape in shapes], progress)
