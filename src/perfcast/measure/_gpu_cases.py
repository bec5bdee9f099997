"""The kernel cases of the torch sweep: what LLMs and CNNs run, built for any torch device.

A `KernelCase` is one sweep point: its store identity (op, family, dtype), its shape in the
kind's own tuple (`SHAPE_FIELDS`), its store coordinates and FLOP/byte counts by perfcast.ops
conventions (`coords`), and `build(device, generator) -> Kernel`, so the same case runs on
torch CPU and on CUDA. A `Kernel` makes fresh seeded input copies (`inputs()`, rotated by the
CUDA timer so L2 does not hold them) and runs the kernel on one copy (`call(inputs)`).

Op names are the forecasts' kernel names, with the implementation after a ':' (the
configuration suffix perfcast.kernels strips to find the kernel variant): `linear` (F.linear;
`linear:scaled_mm` for FP8), `bmm`, `attn:sdpa_flash` / `attn:sdpa_efficient` (and
`attn:flash_attn` / `attn:flashinfer` when installed; the serving tables' `attn` row), `ln`
(F.layer_norm) and `ln:rms` (F.rms_norm; eager fusion's RMSNorm kernel is `ln` too), `gelu`
(tanh), `silu:mul` (SiLU(gate) x up), `softmax`, `add` (residual), `embedding`, `rope`
(rotate-half on q and k) and `conv` (cuDNN, as implicit GEMM).

torch is imported inside the builders: perfcast itself never needs it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any

import numpy as np

from perfcast.errors import InputError, close_matches
from perfcast.measure._harness import _odd_size
from perfcast.ops import attended_keys
from perfcast.specs import bytes_per_element

__all__ = ["DTYPES", "FAMILIES", "KINDS", "SHAPE_FIELDS", "TARGETS", "Kernel", "KernelCase",
           "kernel_cases"]

# kind (one builder) -> store family
KINDS: dict[str, str] = {
    "linear": "gemm", "bmm": "gemm", "attn_prefill": "attn_prefill",
    "attn_decode": "attn_decode", "rms_norm": "norm", "layer_norm": "norm",
    "silu_mul": "activation", "gelu": "activation", "softmax": "softmax", "add": "elementwise",
    "embedding": "embedding", "rope": "rope", "conv": "conv"}
FAMILIES = tuple(dict.fromkeys(KINDS.values()))
SHAPE_FIELDS: dict[str, tuple[str, ...]] = {
    "linear": ("m", "n", "k"), "bmm": ("b", "m", "n", "k"),
    "attn_prefill": ("batch", "heads", "kv_heads", "head_dim", "q_len"),
    "attn_decode": ("batch", "heads", "kv_heads", "head_dim", "kv_len"),
    "rms_norm": ("m", "n"), "layer_norm": ("m", "n"), "silu_mul": ("m", "n"),
    "gelu": ("m", "n"), "softmax": ("m", "n"), "add": ("m", "n"),
    "embedding": ("tokens", "hidden", "vocab"), "rope": ("tokens", "heads", "kv_heads", "head_dim"),
    "conv": ("batch", "c_in", "size", "c_out", "kernel", "stride")}
DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")
TARGETS = ("cuda", "cpu")
_OPS = {"linear": "linear", "bmm": "bmm", "rms_norm": "ln:rms", "layer_norm": "ln",
        "silu_mul": "silu:mul", "gelu": "gelu", "softmax": "softmax", "add": "add",
        "embedding": "embedding", "rope": "rope", "conv": "conv"}
_ATTENTION = ("attn_prefill", "attn_decode")
# attention op -> torch.nn.attention.SDPBackend member (None: an optional library's kernel)
ATTENTION_OPS = {"attn:sdpa_flash": "FLASH_ATTENTION", "attn:sdpa_efficient":
                 "EFFICIENT_ATTENTION", "attn:flash_attn": None, "attn:flashinfer": None}
FP8_MULTIPLE = 16  # torch._scaled_mm (cuBLASLt FP8) wants k and n divisible by 16


@dataclass(frozen=True)
class Kernel:
    """A built case: `inputs()` returns one fresh copy of the inputs, `call(inputs)` runs the
    kernel(s) on a copy; `context()` holds the backend settings (TF32, SDPA backend) the
    calls must run under, entered once around capture and timing, not per call."""

    inputs: Callable[[], tuple]
    call: Callable[[tuple], object]
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext


@dataclass(frozen=True)
class KernelCase:
    """One sweep point (module docstring). `coords` holds the store columns the row takes
    from the case (b, m, n, k, the attention columns, flops, bytes, kv_dtype); equality is
    over everything but the builder."""

    kind: str
    op: str
    family: str
    dtype: str
    shape: tuple[int, ...]
    coords: Mapping[str, Any]
    build: Callable[[Any, Any], Kernel] = field(compare=False, repr=False)

    @property
    def work(self) -> float:
        """A size to order cases by: FLOPs plus bytes."""
        return float(self.coords["flops"]) + float(self.coords["bytes"])


# ---------------------------------------------------------------- coordinates (perfcast.ops)


def _coords(b: float, m: float, n: float, k: float, flops: float, nbytes: float,
            **attention: float) -> dict[str, Any]:
    out = {"b": float(b), "m": float(m), "n": float(n), "k": float(k), "flops": float(flops),
           "bytes": float(nbytes), "kv_dtype": ""}
    out.update({c: float(v) for c, v in attention.items()})
    return out


def _gemm_coords(dtype: str, b: int, m: int, n: int, k: int) -> dict[str, Any]:
    """ops._Ctx.gemm: 2mnk FLOPs; X and W read at the math dtype, Y written at 16 bits for FP8
    (the GEMM's bf16 output) else at the math dtype."""
    e = bytes_per_element(dtype)
    out_e = bytes_per_element("bf16") if dtype == "fp8" else e
    return _coords(b, m, n, k, 2.0 * b * m * n * k, b * ((m * k + k * n) * e + m * n * out_e))


def _attention_coords(kind: str, dtype: str, shape: Sequence[int]) -> dict[str, Any]:
    """ops._transformer._attention: b = batch x heads, m = query tokens, n = keys, k = head
    dim; FLOPs 2·heads·(d_qk + d_v) per attended query-key pair (causal prefill: perfcast.ops
    attended_keys); bytes read Q and K/V of the KV heads once, write O."""
    batch, heads, kv_heads, d, length = shape
    q_len, keys = (length, length) if kind == "attn_prefill" else (1, length)
    pairs = (float(attended_keys(np.array([q_len], float), np.zeros(1), None, True)[0])
             if kind == "attn_prefill" else float(keys))
    e = bytes_per_element(dtype)
    q_bytes = batch * q_len * heads * d * e
    kv_bytes = batch * keys * kv_heads * 2 * d * e
    out = _coords(batch * heads, q_len, keys, d, 2.0 * heads * 2 * d * pairs * batch,
                  2 * q_bytes + kv_bytes, batch=batch, heads=heads, kv_heads=kv_heads,
                  head_dim=d, q_len=q_len, kv_len=keys, window=0)
    out["kv_dtype"] = dtype
    return out


def _vector_coords(kind: str, dtype: str, shape: Sequence[int]) -> dict[str, Any]:
    """ops vector rows, m rows of width n: the fused kernel's reads + writes of full tensors
    (weights, cos/sin tables and token ids not counted) and FLOPs per element."""
    e = bytes_per_element(dtype)
    if kind == "embedding":  # ops: `embed`, reads=1 writes=1, 0 FLOPs
        tokens, hidden, _vocab = shape
        return _coords(1, tokens, hidden, 0, 0.0, 2.0 * tokens * hidden * e)
    if kind == "rope":  # ops: `rope` over q and k, 3 FLOPs per element, reads=1 writes=1
        tokens, heads, kv_heads, d = shape
        width = (heads + kv_heads) * d
        return _coords(1, tokens, width, 0, 3.0 * tokens * width, 2.0 * tokens * width * e)
    m, n = shape
    # per kind: (FLOPs per element, tensors read, tensors written). RMSNorm 4 (ops: input_norm),
    # LayerNorm 5 and softmax 5 (the eager vocabulary), activations 8, the residual add 1.
    # silu:mul counts the fused kernel (gate and up read, one write) as ops' gated `mlp_act`;
    # eager torch runs it as two kernels moving 5mn, which the fit's fixed cost absorbs.
    per_elem, reads, writes = {"rms_norm": (4, 1, 1), "layer_norm": (5, 1, 1),
                               "silu_mul": (8, 2, 1), "gelu": (8, 1, 1), "softmax": (5, 1, 1),
                               "add": (1, 2, 1)}[kind]
    return _coords(1, m, n, 0, per_elem * m * n, (reads + writes) * m * n * e)


def _conv_out(size: int, kernel: int, stride: int) -> int:
    return (size + 2 * (kernel // 2) - kernel) // stride + 1


def _conv_coords(dtype: str, shape: Sequence[int]) -> dict[str, Any]:
    """Implicit GEMM as measure._torch_cpu.torch_kernel's conv: m = N·P·Q, n = C_out,
    k = C_in·R·S; bytes = input + weights + output."""
    batch, c_in, size, c_out, kernel, stride = shape
    out = _conv_out(size, kernel, stride)
    m, n, k = batch * out * out, c_out, c_in * kernel * kernel
    e = bytes_per_element(dtype)
    return _coords(1, m, n, k, 2.0 * m * n * k, e * (batch * c_in * size * size + n * k + m * n))


def case_coords(kind: str, dtype: str, shape: Sequence[int]) -> dict[str, Any]:
    if kind in ("linear", "bmm"):
        b, m, n, k = (1, *shape) if kind == "linear" else shape
        return _gemm_coords(dtype, b, m, n, k)
    if kind in _ATTENTION:
        return _attention_coords(kind, dtype, shape)
    if kind == "conv":
        return _conv_coords(dtype, shape)
    return _vector_coords(kind, dtype, shape)


# ---------------------------------------------------------------- builders (torch, lazily)


def _torch() -> tuple[Any, Any]:
    import torch
    import torch.nn.functional as F  # noqa: N812

    return torch, F


def _torch_dtype(dtype: str) -> Any:
    torch, _ = _torch()
    return {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
            "bf16": torch.bfloat16}[dtype]


def _randn(dims: Sequence[int], dtype: str, device: Any, gen: Any) -> Any:
    torch, _ = _torch()
    return torch.randn(tuple(dims), generator=gen, device=device, dtype=_torch_dtype(dtype))


@contextlib.contextmanager
def _tf32(enabled: bool) -> Iterator[None]:
    """TF32 for cuBLAS and cuDNN on (the `tf32` rows) or off (true fp32), restored after."""
    torch, _ = _torch()
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def _linear(shape: Sequence[int], dtype: str, device: Any, gen: Any) -> Kernel:
    torch, F = _torch()
    m, n, k = shape
    if dtype == "fp8":  # per-tensor scales, e4m3 operands, bf16 out; W column-major
        f8 = torch.float8_e4m3fn
        scale = torch.ones((), device=device, dtype=torch.float32)

        def fp8_inputs() -> tuple:
            return (_randn((m, k), "bf16", device, gen).to(f8),
                    _randn((n, k), "bf16", device, gen).to(f8).t())

        return Kernel(fp8_inputs, lambda t: torch._scaled_mm(
            t[0], t[1], scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16))
    return Kernel(lambda: (_randn((m, k), dtype, device, gen), _randn((n, k), dtype, device, gen)),
                  lambda t: F.linear(t[0], t[1]), partial(_tf32, dtype == "tf32"))


def _bmm(shape: Sequence[int], dtype: str, device: Any, gen: Any) -> Kernel:
    torch, _ = _torch()
    b, m, n, k = shape
    return Kernel(lambda: (_randn((b, m, k), dtype, device, gen),
                           _randn((b, k, n), dtype, device, gen)),
                  lambda t: torch.bmm(t[0], t[1]), partial(_tf32, dtype == "tf32"))


def _sdpa_context(backend: str) -> contextlib.AbstractContextManager:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, backend)])


def _attention(kind: str, op: str, shape: Sequence[int], dtype: str, device: Any,
               gen: Any) -> Kernel:
    """Causal prefill over q_len new tokens, or one decode token over kv_len keys (not causal:
    a single query sees every key), GQA where kv_heads < heads."""
    torch, F = _torch()
    batch, heads, kv_heads, d, length = shape
    q_len = length if kind == "attn_prefill" else 1
    causal, gqa = kind == "attn_prefill", kv_heads < heads
    if op == "attn:flash_attn":  # [batch, seq, heads, d]; GQA native
        from flash_attn import flash_attn_func

        def fa_inputs() -> tuple:
            return (_randn((batch, q_len, heads, d), dtype, device, gen),
                    _randn((batch, length, kv_heads, d), dtype, device, gen),
                    _randn((batch, length, kv_heads, d), dtype, device, gen))

        return Kernel(fa_inputs, lambda t: flash_attn_func(*t, causal=causal))
    if op == "attn:flashinfer":  # one sequence: [seq, heads, d] (decode: q [heads, d])
        import flashinfer

        def fi_inputs() -> tuple:
            q = _randn((q_len, heads, d), dtype, device, gen)
            return ((q if causal else q[0]), _randn((length, kv_heads, d), dtype, device, gen),
                    _randn((length, kv_heads, d), dtype, device, gen))

        if causal:
            return Kernel(fi_inputs, lambda t: flashinfer.single_prefill_with_kv_cache(
                *t, causal=True))
        return Kernel(fi_inputs, lambda t: flashinfer.single_decode_with_kv_cache(*t))

    def inputs() -> tuple:  # [batch, heads, seq, d]
        return (_randn((batch, heads, q_len, d), dtype, device, gen),
                _randn((batch, kv_heads, length, d), dtype, device, gen),
                _randn((batch, kv_heads, length, d), dtype, device, gen))

    kwargs = {"is_causal": causal, **({"enable_gqa": True} if gqa else {})}
    return Kernel(inputs, lambda t: F.scaled_dot_product_attention(*t, **kwargs),
                  partial(_sdpa_context, ATTENTION_OPS[op]))


def _rotate_half(x: Any) -> Any:
    torch, _ = _torch()
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _vector(kind: str, shape: Sequence[int], dtype: str, device: Any, gen: Any) -> Kernel:
    torch, F = _torch()
    if kind == "embedding":
        tokens, hidden, vocab = shape
        ids = torch.randint(0, vocab, (tokens,), generator=gen, device=device)
        return Kernel(lambda: (ids, _randn((vocab, hidden), dtype, device, gen)),
                      lambda t: F.embedding(t[0], t[1]))
    if kind == "rope":  # HF apply_rotary_pos_emb on q [t, heads, d] and k [t, kv_heads, d]
        tokens, heads, kv_heads, d = shape
        cos, sin = (_randn((tokens, 1, d), dtype, device, gen) for _ in range(2))

        def rope(t: tuple) -> tuple:
            q, k = t
            return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin

        return Kernel(lambda: (_randn((tokens, heads, d), dtype, device, gen),
                               _randn((tokens, kv_heads, d), dtype, device, gen)), rope)
    m, n = shape
    if kind == "silu_mul":  # the gate_up projection's output [m, 2n], split in two views
        def silu_mul(t: tuple) -> Any:
            gate, up = t[0].chunk(2, dim=-1)
            return F.silu(gate) * up

        return Kernel(lambda: (_randn((m, 2 * n), dtype, device, gen),), silu_mul)
    if kind == "add":
        return Kernel(lambda: (_randn((m, n), dtype, device, gen),
                               _randn((m, n), dtype, device, gen)), lambda t: t[0] + t[1])
    weight = _randn((n,), dtype, device, gen)
    bias = _randn((n,), dtype, device, gen)
    calls = {"rms_norm": lambda t: F.rms_norm(t[0], (n,), weight, 1e-6),
             "layer_norm": lambda t: F.layer_norm(t[0], (n,), weight, bias),
             "gelu": lambda t: F.gelu(t[0], approximate="tanh"),
             "softmax": lambda t: torch.softmax(t[0], dim=-1)}
    return Kernel(lambda: (_randn((m, n), dtype, device, gen),), calls[kind])


def _conv(shape: Sequence[int], dtype: str, device: Any, gen: Any) -> Kernel:
    """conv2d without bias, padding kernel // 2 (torchvision ResNets), NCHW."""
    _, F = _torch()
    batch, c_in, size, c_out, kernel, stride = shape
    w = _randn((c_out, c_in, kernel, kernel), dtype, device, gen)
    return Kernel(lambda: (_randn((batch, c_in, size, size), dtype, device, gen), w),
                  lambda t: F.conv2d(t[0], t[1], None, stride, kernel // 2),
                  partial(_tf32, dtype == "tf32"))


def _builder(kind: str, op: str, shape: tuple[int, ...], dtype: str
             ) -> Callable[[Any, Any], Kernel]:
    if kind == "linear":
        return partial(_linear, shape, dtype)
    if kind == "bmm":
        return partial(_bmm, shape, dtype)
    if kind in _ATTENTION:
        return partial(_attention, kind, op, shape, dtype)
    if kind == "conv":
        return partial(_conv, shape, dtype)
    return partial(_vector, kind, shape, dtype)


def make_case(kind: str, shape: Sequence[int], dtype: str, op: str | None = None) -> KernelCase:
    """The case of `kind` at `shape` (SHAPE_FIELDS order) and `dtype`; `op` picks the
    attention implementation (ATTENTION_OPS)."""
    shape = tuple(int(v) for v in shape)
    op = op or ("linear:scaled_mm" if kind == "linear" and dtype == "fp8"
                else _OPS.get(kind, "attn:sdpa_flash"))
    return KernelCase(kind, op, KINDS[kind], dtype, shape, case_coords(kind, dtype, shape),
                      _builder(kind, op, shape, dtype))


# ---------------------------------------------------------------- availability


def _module_available(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def attention_ops(target: str) -> tuple[str, ...]:
    """The attention implementations to try: torch's SDPA flash and memory-efficient
    backends, plus flash-attn and FlashInfer kernels on CUDA when they are installed."""
    ops = ["attn:sdpa_flash", "attn:sdpa_efficient"]
    if target == "cuda":
        ops += [op for op, mod in (("attn:flash_attn", "flash_attn"),
                                   ("attn:flashinfer", "flashinfer")) if _module_available(mod)]
    return tuple(ops)


def capture_graph(torch: Any, call: Callable[[], object]) -> Callable[[], None]:
    """`call` captured into a CUDA graph after a warm-up on a side stream (torch.cuda.graphs
    docs); returns the graph's replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    return graph.replay


def _captured(torch: Any, call: Callable[[], object]) -> None:
    """`call` captured into a CUDA graph and replayed once."""
    capture_graph(torch, call)()
    torch.cuda.synchronize()


@lru_cache(maxsize=256)
def _attention_runs(op: str, kind: str, dtype: str, heads: int, kv_heads: int, d: int,
                    batch_one: bool, device: str) -> bool:
    """Whether the implementation takes this configuration: a tiny instance of it is run,
    and on CUDA captured in a graph too (SDPA refuses what a backend cannot do: dtype, head
    dim, GQA; an old torch lacks `sdpa_kernel` or `enable_gqa`)."""
    import torch

    if op == "attn:flashinfer" and not batch_one:  # the single-sequence API only
        return False
    case = make_case(kind, (1, heads, kv_heads, d, 16), dtype, op)
    gen = torch.Generator(device=device).manual_seed(0)
    try:
        kernel = case.build(torch.device(device), gen)
        with torch.no_grad(), kernel.context():
            inputs = kernel.inputs()
            kernel.call(inputs)
            if torch.device(device).type == "cuda":
                _captured(torch, lambda: kernel.call(inputs))
    except (RuntimeError, ValueError, TypeError, NotImplementedError, ImportError,
            AttributeError):
        return False
    return True


def runnable(case: KernelCase, device: Any, fp8: bool) -> bool:
    """Whether `case` runs on the torch `device`: FP8 only where `fp8` (sm >= 8.9), attention
    only through the implementations that accept its configuration."""
    if case.dtype == "fp8":
        return fp8
    if case.kind in _ATTENTION:
        batch, heads, kv_heads, d, _ = case.shape
        return _attention_runs(case.op, case.kind, case.dtype, heads, kv_heads, d, batch == 1,
                               str(device))
    return True


# ---------------------------------------------------------------- shapes


@dataclass(frozen=True)
class _Grid:
    """Sizes of one target and mode (quick or full)."""

    tokens: tuple[int, ...]
    nk: tuple[tuple[int, int], ...]  # (n, k) of LLM projections
    other_tokens: tuple[int, ...]  # linear grid of the other dtypes
    other_nk: int  # how many of `nk` they take
    seqs: tuple[int, ...]  # bmm / prefill lengths
    heads: tuple[tuple[int, int, int], ...]  # (heads, kv_heads, head_dim)
    decode_batch: tuple[int, ...]
    decode_keys: tuple[int, ...]
    rows: tuple[int, ...]  # vector rows (tokens)
    widths: tuple[int, ...]  # hidden sizes
    inter: tuple[int, ...]  # MLP intermediate widths
    vocab: tuple[tuple[int, int], ...]  # (hidden, vocab) embedding tables
    convs: tuple[tuple[int, ...], ...]
    n_odd: int  # seeded non-power-of-two points per kind
    prefill_tokens: int  # batch x q_len of a prefill case
    max_kv_bytes: float  # cap on a decode case's K and V


# Llama-2-7B qkv / o / gate_up / down, Llama-3-8B qkv / gate_up / down, Llama-3-70B per GPU
# at TP 8 (qkv, o, gate_up, down), GPT-2 qkv / down, Llama-2's lm_head.
_LLM_NK = ((4096, 4096), (12288, 4096), (4096, 11008), (1280, 8192), (2304, 768),
           (22016, 4096), (6144, 4096), (28672, 4096), (4096, 14336), (8192, 1024),
           (7168, 8192), (8192, 3584), (768, 3072), (32000, 4096))
_CPU_NK = ((768, 768), (2304, 768), (768, 3072), (3072, 768), (1024, 1024), (4096, 1024))
# (heads, kv_heads, head_dim): Llama-2-7B (MHA), Llama-3-8B (GQA 4), GPT-2, Llama-3-70B
# per GPU at TP 8 (GQA 8), Qwen2-7B (GQA 7), Llama-3-70B (GQA 8), a 16-head d=64 model
_HEADS = ((32, 32, 128), (32, 8, 128), (12, 12, 64), (8, 1, 128), (28, 4, 128),
          (64, 8, 128), (16, 16, 64))
# ResNet-style convs (batch, c_in, size, c_out, kernel, stride): 3x3 stages, stride-2 3x3 and
# 1x1 downsamples, the 7x7 stem, bottleneck 1x1s
_RESNET = ((64, 56, 64, 3, 1), (128, 28, 128, 3, 1), (256, 14, 256, 3, 1), (512, 7, 512, 3, 1),
           (64, 56, 128, 3, 2), (128, 28, 256, 3, 2), (64, 56, 128, 1, 2), (3, 224, 64, 7, 2),
           (256, 56, 64, 1, 1), (64, 56, 256, 1, 1), (512, 14, 128, 1, 1), (1024, 14, 256, 1, 1))


def _grid(target: str, quick: bool) -> _Grid:
    if target == "cpu":
        return _Grid(
            tokens=(1, 16, 128) if quick else (1, 4, 16, 64, 128, 256),
            nk=_CPU_NK[:3] if quick else _CPU_NK, other_tokens=(), other_nk=0,
            seqs=(64, 256) if quick else (32, 64, 128, 256, 512),
            heads=((12, 12, 64), (8, 2, 64)) if quick else ((12, 12, 64), (8, 2, 64),
                                                            (16, 16, 64)),
            decode_batch=(1, 4) if quick else (1, 4, 16), decode_keys=(128, 1024) if quick
            else (64, 256, 1024, 2048), rows=(1, 16, 128) if quick else (1, 4, 16, 64, 256),
            widths=(768,) if quick else (256, 768, 1024), inter=(3072,) if quick else
            (1024, 3072), vocab=((768, 8192),), n_odd=2 if quick else 6,
            convs=tuple((1, *c) for c in _RESNET[:4 if quick else 12]),
            prefill_tokens=256, max_kv_bytes=64e6)
    return _Grid(
        tokens=(1, 32, 256, 2048) if quick else (1, 4, 16, 64, 128, 256, 512, 1024, 2048,
                                                 4096, 8192),
        nk=_LLM_NK[:5] if quick else _LLM_NK, other_tokens=(1, 256, 2048) if quick
        else (1, 16, 128, 1024, 4096), other_nk=3 if quick else 7,
        seqs=(128, 1024, 4096) if quick else (128, 512, 1024, 2048, 4096, 8192),
        heads=_HEADS[:3] if quick else _HEADS, decode_batch=(1, 32) if quick
        else (1, 8, 32, 128), decode_keys=(1024, 8192) if quick
        else (128, 1024, 4096, 16384, 65536), rows=(1, 128, 4096) if quick
        else (1, 16, 128, 512, 2048, 8192, 32768), widths=(768, 4096) if quick
        else (768, 2048, 4096, 5120, 8192), inter=(3072, 11008) if quick
        else (3072, 11008, 14336, 3584, 28672), vocab=((4096, 32000),) if quick
        else ((4096, 32000), (8192, 128256), (768, 50257)), n_odd=2 if quick else 6,
        convs=tuple((b, *c) for b in ((1, 32) if not quick else (8,))
                    for c in (_RESNET[:6] if quick else _RESNET)),
        prefill_tokens=8192, max_kv_bytes=4e9)


def _kind_dtypes(kind: str) -> tuple[str, ...]:
    """Every dtype a kind can be timed at (FP8 is a GEMM's; TF32 a matmul or conv's)."""
    if kind == "linear":
        return DTYPES
    if kind in ("bmm", "conv"):
        return ("fp32", "tf32", "fp16", "bf16")
    return ("fp32", "fp16", "bf16")


def _default_dtypes(target: str, kind: str, half: str = "bf16") -> tuple[str, ...]:
    """A kind's dtypes, its main grid's first; `half` stands in for bf16 (fp16 on GPUs
    without bf16)."""
    if target == "cpu":
        return ("fp32",)
    if kind == "linear":
        dtypes = ("bf16", "fp16", "fp32", "tf32", "fp8")
    elif kind == "conv":
        dtypes = ("fp32", "bf16")
    elif kind in ("bmm", *_ATTENTION):
        dtypes = ("bf16",)
    else:
        dtypes = ("bf16", "fp32")
    return tuple(dict.fromkeys(half if d == "bf16" else d for d in dtypes))


def _shapes(kind: str, g: _Grid, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """The main (first-dtype) grid of `kind`, seeded odd sizes last."""
    odd = partial(_odd_size, rng)
    hi_tokens = max(g.tokens + g.rows)
    if kind == "linear":
        return ([(m, n, k) for m in g.tokens for n, k in g.nk]
                + [(odd(1, hi_tokens), FP8_MULTIPLE * odd(16, 1024),
                    FP8_MULTIPLE * odd(16, 512)) for _ in range(g.n_odd)])
    if kind == "bmm":
        dims = [(h, d) for h, _, d in g.heads[:2]]
        out = [(h, s, s, d) for h, d in dims for s in g.seqs]
        out += [(h, s, d, s) for h, d in dims for s in g.seqs]
        return out + [(odd(2, 64), odd(16, 2048), odd(16, 2048), odd(16, 256))
                      for _ in range(g.n_odd)]
    if kind == "attn_prefill":
        out = [(max(1, g.prefill_tokens // s), h, kv, d, s) for h, kv, d in g.heads
               for s in g.seqs]
        return out + [(1, h, kv, d, odd(16, max(g.seqs)))
                      for h, kv, d in g.heads[:g.n_odd]]
    if kind == "attn_decode":
        out = [(b, h, kv, d, n) for h, kv, d in g.heads for b in g.decode_batch
               for n in g.decode_keys]
        out += [(odd(2, max(g.decode_batch)), h, kv, d, odd(16, max(g.decode_keys)))
                for h, kv, d in g.heads[:g.n_odd]]
        return [s for s in out if s[0] * s[4] * s[2] * s[3] * 2 * 2 <= g.max_kv_bytes]
    if kind == "embedding":
        return [(t, h, v) for h, v in g.vocab for t in g.rows] + [
            (odd(3, hi_tokens), g.vocab[0][0], g.vocab[0][1]) for _ in range(g.n_odd)]
    if kind == "rope":
        return [(t, h, kv, d) for h, kv, d in g.heads[:3] for t in g.rows] + [
            (odd(3, hi_tokens), *g.heads[0]) for _ in range(g.n_odd)]
    if kind == "conv":
        return list(g.convs) + [
            (1, odd(3, 512), odd(7, 112), odd(16, 512), int(rng.choice([1, 3, 3, 7])),
             int(rng.choice([1, 1, 2]))) for _ in range(g.n_odd)]
    widths = g.inter if kind in ("silu_mul", "gelu") else g.widths
    out = [(m, n) for m in g.rows for n in widths]
    if kind == "softmax":  # attention scores (heads x seq rows, seq wide) and logits
        out = [(h * s, s) for h in (g.heads[0][0],) for s in g.seqs[:3]]
        out += [(m, v) for m in g.rows[:3] for _, v in g.vocab[:1]]
    return out + [(odd(3, hi_tokens), odd(64, max(widths))) for _ in range(g.n_odd)]


def _other_dtype_shapes(kind: str, main: list[tuple[int, ...]], g: _Grid
                        ) -> list[tuple[int, ...]]:
    """The sub-grid timed at a kind's other dtypes."""
    if kind == "linear":
        return [(m, n, k) for m in g.other_tokens for n, k in g.nk[:g.other_nk]]
    if kind == "conv":
        return main
    return main[::4]


def _check_shapes(shapes: Mapping[str, Sequence[Sequence[int]]]) -> None:
    for kind, given in shapes.items():
        if kind not in KINDS:
            hint = close_matches(str(kind), KINDS)
            raise InputError("shapes", f"unknown kind {kind!r}" + (
                f"; did you mean {', '.join(hint)}?" if hint else ""), list(KINDS))
        size = len(SHAPE_FIELDS[kind])
        for shape in given:
            if len(shape) != size or min(shape) < 1:
                raise InputError(f"shapes.{kind}", f"bad shape {tuple(shape)}",
                                 f"({', '.join(SHAPE_FIELDS[kind])}), positive integers")


def _check_names(field_name: str, given: Iterable[str] | None, allowed: Sequence[str]
                 ) -> set[str] | None:
    if given is None:
        return None
    chosen = {str(v) for v in given}
    bad = sorted(chosen - set(allowed))
    if bad:
        raise InputError(field_name, f"unknown values {bad}", list(allowed))
    return chosen


def kernel_cases(target: str = "cuda", quick: bool = False, seed: int = 0,
                 families: Iterable[str] | None = None, dtypes: Iterable[str] | None = None,
                 shapes: Mapping[str, Sequence[Sequence[int]]] | None = None,
                 half: str = "bf16") -> list[KernelCase]:
    """The sweep's cases for `target` ('cuda' or 'cpu'), deterministic for (target, quick,
    seed): per kind a grid over what LLMs and CNNs run plus seeded sizes that are not powers
    of two, at the kind's dtypes. cuda: GEMMs bf16 on the full grid and fp16/fp32/tf32/fp8
    on a sub-grid; attention and bmm bf16; vector kinds bf16 plus an fp32 sub-grid; conv
    fp32 and bf16 (`half` = 'fp16' runs fp16 in bf16's place). cpu: fp32 only, smaller
    sizes. Attention cases come once per implementation of `attention_ops(target)`.
    `families` narrows the sweep; `dtypes` replaces each kind's dtypes with those of them the
    kind has (the first on the main grid); `shapes` ({kind: [shape, ...]}, SHAPE_FIELDS
    order) times only the kinds it names, at those shapes. Which cases a device can run is
    `runnable`'s business, not this plan's."""
    if target not in TARGETS:
        raise InputError("device", f"unknown device {target!r}", TARGETS)
    if half not in ("bf16", "fp16"):
        raise InputError("half", f"unknown 16-bit dtype {half!r}", ["bf16", "fp16"])
    fams = _check_names("families", families, FAMILIES)
    wanted = _check_names("dtypes", dtypes, DTYPES)
    if shapes is not None:
        _check_shapes(shapes)
    rng, g = np.random.default_rng(seed), _grid(target, quick)
    cases: list[KernelCase] = []
    for kind in KINDS:
        main = _shapes(kind, g, rng)  # drawn for every kind: stable seeds
        if fams is not None and KINDS[kind] not in fams:
            continue
        given = None if shapes is None else shapes.get(kind)
        if shapes is not None and given is None:
            continue
        kind_dtypes = list(_default_dtypes(target, kind, half))
        if wanted is not None:  # the asked-for dtypes the kind has, its defaults' order first
            kind_dtypes = [d for d in kind_dtypes if d in wanted] + sorted(
                d for d in wanted - set(kind_dtypes) if d in _kind_dtypes(kind))
        for i, dtype in enumerate(kind_dtypes):
            grid = (list(given) if given is not None else
                    main if i == 0 else _other_dtype_shapes(kind, main, g))
            if dtype == "fp8":  # k and n divisible by 16
                grid = [s for s in grid if s[1] % FP8_MULTIPLE == 0 and s[2] % FP8_MULTIPLE == 0]
            ops = attention_ops(target) if kind in _ATTENTION else (None,)
            cases += [make_case(kind, shape, dtype, op) for op in ops for shape in grid]
    return cases
