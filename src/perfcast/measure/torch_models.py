"""Hand-written torch models for scenario X5 (forecast, then measure, on this CPU) and how to
time them on a shared machine; `perfcast cpu` and tests/measure/test_cpu_end_to_end.py use
them. A public submodule, not re-exported by perfcast.measure: importing it needs torch (the
`perfcast[torch]` extra).

`ResNet18` follows torchvision's ResNet-18 (BasicBlocks, in-place ReLU, `out += identity`)
and `GPT2` HF's eager GPT2LMHeadModel (Conv1D addmm projections, explicit q@k^T, a division
by sqrt(head_dim), the causal `torch.where` mask, softmax, `gelu_new` as eight kernels, a
tied lm_head over all positions). `GPT2Config(attention="sdpa")` runs HF's SDPA path instead
(one `scaled_dot_product_attention`, the DynamicCache concatenation of an eval forward), and
`GPT2.decode` one generate() step over a KV cache (`GPT2.prefill` builds it). Every kernel goes
through `_k(op, fn, ...)`, which runs it and, inside `trace_kernels()`, records it under its
eager-vocabulary op name so each kernel can be replayed and timed alone. torchvision and
transformers are not needed.
"""

from __future__ import annotations

import contextlib
import functools
import math
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from perfcast.measure._torch_cpu import time_torch_call

_TRACE: list[tuple[str, Callable, tuple, dict]] | None = None


def _k(op: str, fn: Callable, *args, **kwargs):
    """Run one kernel; record it when tracing."""
    if _TRACE is not None:
        _TRACE.append((op, fn, args, kwargs))
    return fn(*args, **kwargs)


@contextlib.contextmanager
def trace_kernels() -> Iterator[list[tuple[str, Callable, tuple, dict]]]:
    global _TRACE
    _TRACE = []
    try:
        yield _TRACE
    finally:
        _TRACE = None


# ---------------------------------------------------------------- ResNet-18 (torchvision)


def _conv3x3(c_in: int, c_out: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    def __init__(self, inplanes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = _conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = _k("conv", self.conv1, x)
        out = _k("bn", self.bn1, out)
        out = _k("relu", self.relu, out)
        out = _k("conv", self.conv2, out)
        out = _k("bn", self.bn2, out)
        if self.downsample is not None:
            identity = _k("conv", self.downsample[0], x)
            identity = _k("bn", self.downsample[1], identity)
        out = _k("add", torch.Tensor.add_, out, identity)  # out += identity
        return _k("relu", self.relu, out)


class ResNet18(nn.Module):
    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        stages, inplanes = [], 64
        for i, planes in enumerate((64, 128, 256, 512)):
            stride = 1 if i == 0 else 2
            stages.append(nn.Sequential(BasicBlock(inplanes, planes, stride),
                                        BasicBlock(planes, planes)))
            inplanes = planes
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _k("conv", self.conv1, x)
        x = _k("bn", self.bn1, x)
        x = _k("relu", self.relu, x)
        x = _k("maxpool", self.maxpool, x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = _k("avgpool", self.avgpool, x)
        x = torch.flatten(x, 1)
        return _k("linear", self.fc, x)


# ---------------------------------------------------------------- GPT-2 (HF eager)


@dataclass(frozen=True)
class GPT2Config:
    vocab_size: int = 50257
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    layer_norm_epsilon: float = 1e-5
    n_inner: int | None = None  # MLP width; None: 4 x n_embd
    attention: str = "eager"  # "eager" (materialised scores) or "sdpa" (HF's SDPA path)


class Conv1D(nn.Module):
    """HF's Conv1D: y = x W + b with W stored [in, out]; one addmm."""

    def __init__(self, nf: int, nx: int):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf).normal_(std=0.02))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size_out = x.size()[:-1] + (self.nf,)
        x = _k("linear", torch.addmm, self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


def _merge_heads(t: torch.Tensor) -> torch.Tensor:
    return t.permute(0, 2, 1, 3).contiguous()


Past = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: cached keys, values


class GPT2Attention(nn.Module):
    def __init__(self, cfg: GPT2Config):
        super().__init__()
        n = cfg.n_positions
        self.register_buffer("bias", torch.tril(torch.ones((n, n), dtype=torch.bool)).view(
            1, 1, n, n), persistent=False)
        self.embed_dim, self.num_heads = cfg.n_embd, cfg.n_head
        self.head_dim = cfg.n_embd // cfg.n_head
        self.sdpa = cfg.attention == "sdpa"
        self.c_attn = Conv1D(3 * cfg.n_embd, cfg.n_embd)
        self.c_proj = Conv1D(cfg.n_embd, cfg.n_embd)
        self.attn_dropout, self.resid_dropout = nn.Dropout(0.1), nn.Dropout(0.1)

    def _split_heads(self, t: torch.Tensor) -> torch.Tensor:
        return t.view(t.size()[:-1] + (self.num_heads, self.head_dim)).permute(0, 2, 1, 3)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.attend(hidden)[0]

    def attend(self, hidden: torch.Tensor, past: tuple | None = None, use_cache: bool = False
               ) -> tuple[torch.Tensor, tuple | None]:
        """The attention output and, with `use_cache`, the keys and values now cached (the
        past's with this step's appended: one copy each, as HF's DynamicCache does)."""
        query, key, value = self.c_attn(hidden).split(self.embed_dim, dim=2)
        query, key, value = (self._split_heads(t) for t in (query, key, value))
        if use_cache:
            past_k, past_v = past if past is not None else (key[:, :, :0], value[:, :, :0])
            key = _k("copy", torch.cat, [past_k, key], dim=-2)
            value = _k("copy", torch.cat, [past_v, value], dim=-2)
        out = self._sdpa(query, key, value) if self.sdpa else self._eager(query, key, value)
        out = out.view(out.size()[:-2] + (self.embed_dim,))
        return self.resid_dropout(self.c_proj(out)), (key, value) if use_cache else None

    def _eager(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
               ) -> torch.Tensor:
        w = _k("bmm", torch.matmul, query, key.transpose(-1, -2))
        w = _k("divu", torch.div, w, torch.full([], value.size(-1) ** 0.5, dtype=w.dtype))
        q_len, k_len = query.size(-2), key.size(-2)
        causal = self.bias[:, :, k_len - q_len:k_len, :k_len]
        mask_value = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype)
        w = _k("where", torch.where, causal, w, mask_value)
        w = _k("softmax", F.softmax, w, dim=-1)
        w = self.attn_dropout(w)
        out = _k("bmm", torch.matmul, w, value)
        return _k("copy", _merge_heads, out)

    def _sdpa(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
              ) -> torch.Tensor:
        """HF's sdpa_attention_forward: causal over a prompt, unmasked for one new token;
        the output's head transpose is a view of the kernel's [b, s, h, d] result."""
        p = self.attn_dropout.p if self.training else 0.0
        out = _k("sdpa", F.scaled_dot_product_attention, query, key, value, dropout_p=p,
                 is_causal=query.size(-2) > 1)
        return out.transpose(1, 2).contiguous()


def gelu_new(x: torch.Tensor) -> torch.Tensor:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), eight eager kernels as HF runs it."""
    half = _k("mulu", torch.mul, x, 0.5)
    cube = _k("powu", torch.pow, x, 3.0)
    cube = _k("mulu", torch.mul, cube, 0.044715)
    inner = _k("add", torch.add, x, cube)
    inner = _k("mulu", torch.mul, inner, math.sqrt(2.0 / math.pi))
    t = _k("tanh", torch.tanh, inner)
    t = _k("addu", torch.add, t, 1.0)
    return _k("mul", torch.mul, half, t)


class GPT2MLP(nn.Module):
    def __init__(self, cfg: GPT2Config):
        super().__init__()
        inner = cfg.n_inner or 4 * cfg.n_embd
        self.c_fc = Conv1D(inner, cfg.n_embd)
        self.c_proj = Conv1D(cfg.n_embd, inner)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(gelu_new(self.c_fc(x))))


class GPT2Block(nn.Module):
    def __init__(self, cfg: GPT2Config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.attn = GPT2Attention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.mlp = GPT2MLP(cfg)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.step(hidden)[0]

    def step(self, hidden: torch.Tensor, past: tuple | None = None, use_cache: bool = False
             ) -> tuple[torch.Tensor, tuple | None]:
        residual = hidden
        attn, present = self.attn.attend(_k("ln", self.ln_1, hidden), past, use_cache)
        hidden = _k("add", torch.add, attn, residual)
        residual = hidden
        mlp = self.mlp(_k("ln", self.ln_2, hidden))
        return _k("add", torch.add, residual, mlp), present


class GPT2(nn.Module):
    """GPT2LMHeadModel: logits for every position of a forward (with `attention="sdpa"` an
    eval forward also fills a cache, as HF's default `use_cache=True` does), or of one new
    token per sequence over a KV cache (`decode`)."""

    def __init__(self, cfg: GPT2Config | None = None):
        super().__init__()
        cfg = cfg or GPT2Config()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.n_positions, cfg.n_embd)
        nn.init.normal_(self.wte.weight, std=0.02)
        nn.init.normal_(self.wpe.weight, std=0.01)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList(GPT2Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        cache = self.cfg.attention == "sdpa" and not self.training
        return self._run(input_ids, None, cache)[0]

    def prefill(self, input_ids: torch.Tensor) -> Past:
        """The KV cache after a forward over `input_ids` (a prompt of `context` tokens)."""
        return self._run(input_ids, None, True)[1]

    def decode(self, input_ids: torch.Tensor, past: Past) -> torch.Tensor:
        """Logits of one generate() step: `input_ids` [batch, 1] over the cached `past`
        (not modified: each call appends to a copy, as a fresh step would)."""
        return self._run(input_ids, past, True)[0]

    def _run(self, input_ids: torch.Tensor, past: Past | None, use_cache: bool
             ) -> tuple[torch.Tensor, Past]:
        start = 0 if past is None else past[0][0].size(-2)
        positions = torch.arange(start, start + input_ids.size(-1),
                                 dtype=torch.long, device=input_ids.device).unsqueeze(0)
        tokens = _k("embedding", self.wte, input_ids)
        where = _k("embedding", self.wpe, positions)
        hidden = self.drop(_k("add", torch.add, tokens, where))
        presents = []
        for i, block in enumerate(self.h):
            hidden, present = block.step(hidden, None if past is None else past[i], use_cache)
            presents.append(present)
        hidden = _k("ln", self.ln_f, hidden)
        return _k("linear", F.linear, hidden, self.wte.weight), presents  # tied lm_head


def resnet18_case(batch: int = 1, image: int = 224) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """ResNet-18 in eval mode (seeded weights) and one batch of images."""
    torch.manual_seed(0)
    return ResNet18().eval(), (torch.randn(batch, 3, image, image),)


def gpt2_case(batch: int = 1, seq: int = 128) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """GPT-2 small (124M) in eval mode (seeded weights) and one batch of token ids."""
    torch.manual_seed(0)
    return GPT2().eval(), (torch.randint(0, 50257, (batch, seq)),)


# ---------------------------------------------------------------- timing on a shared machine


UNDISTURBED = 0.93  # thread CPU time / wall time of a forward no other process interrupted
SLACK = 0.08  # how much slower than its baseline the reference may run on a "quiet" machine
WARM_S = 0.25  # a call's warm-up ends after this many seconds (at least one call)


def _one_thread(fn: Callable[[], object], grad: bool = False) -> object:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.set_grad_enabled(grad):
            return fn()
    finally:
        torch.set_num_threads(before)


def reference_s() -> tuple[float, float]:
    """How fast this CPU runs right now: seconds of a fixed conv + GEMM (compute, in cache)
    and of a fixed 96 MiB add (DRAM traffic), timed like the sweep. Another tenant on the
    same core, last-level cache or memory slows these down even when the OS never
    deschedules us (what thread CPU time cannot see)."""
    x, w, a, b, big, out = _reference_data()
    compute = _one_thread(lambda: time_torch_call(
        lambda: (F.conv2d(x, w, None, 1, 1), torch.mm(a, b)), 7))
    memory = _one_thread(lambda: time_torch_call(  # into a buffer: no page faults timed
        lambda: torch.add(big[0], big[1], out=out), 5))
    return float(compute), float(memory)


@functools.cache
def _reference_data() -> tuple[torch.Tensor, ...]:
    """The reference kernels' seeded operands, drawn once per process (96 MiB; drawing the
    big ones took longer than timing them, and a measurement calls the reference before
    and after every attempt)."""
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(1, 64, 28, 28, generator=gen), torch.randn(64, 64, 3, 3, generator=gen)
    a, b = torch.randn(128, 768, generator=gen), torch.randn(768, 768, generator=gen)
    big, out = torch.randn(2, 8 * 2**20, generator=gen), torch.empty(8 * 2**20)
    return x, w, a, b, big, out


def slowdown(now: tuple[float, float], baseline: tuple[float, float]) -> float:
    """How much slower the reference runs now than at `baseline` (the worse of its parts)."""
    return max(n / b for n, b in zip(now, baseline, strict=True))


def forward_times_s(model: nn.Module, inputs: tuple, repeats: int, warmup: int = 2
                    ) -> list[tuple[float, float]]:
    """(wall, thread CPU) seconds of `repeats` forwards after `warmup` (no_grad, one
    thread: all of the forward's work runs on the calling thread)."""
    return call_times_s(lambda: model(*inputs), repeats, warmup)


def call_times_s(fn: Callable[[], object], repeats: int, warmup: int = 2, grad: bool = False
                 ) -> list[tuple[float, float]]:
    """(wall, thread CPU) seconds of `repeats` calls of `fn` after `warmup` calls, on one
    thread (autograd on with `grad`: a training step's backward runs on the calling thread
    too). The warm-up stops early once it has run WARM_S: the first call of a slow step
    (a training step's, which allocates the gradients and the optimizer's state) is all the
    warming it needs, and another would cost as long as a timed one."""
    def run() -> list[tuple[float, float]]:
        start = time.perf_counter()
        for _ in range(warmup):
            fn()
            if time.perf_counter() - start >= WARM_S:
                break
        samples = []
        for _ in range(repeats):
            cpu, start = time.thread_time(), time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start, time.thread_time() - cpu))
        return samples

    return _one_thread(run, grad)


def measure_forward_s(model: nn.Module, inputs: tuple, baseline: tuple[float, float],
                      repeats: int = 5, attempts: int = 5, wait_s: float = 1.5) -> dict:
    """Median wall time of `repeats` forwards on a quiet CPU (`measure_call_s`)."""
    return measure_call_s(lambda: model(*inputs), baseline, repeats, attempts, wait_s)


def measure_call_s(fn: Callable[[], object], baseline: tuple[float, float], repeats: int = 5,
                   attempts: int = 5, wait_s: float = 1.5, grad: bool = False) -> dict:
    """Median wall time of `repeats` calls of `fn` (a forward, a decode step, a training
    step with `grad`) on a quiet CPU.

    An attempt counts when the reference (`reference_s`) runs within SLACK of `baseline`
    (its time when the calibration sweep ran) just before and just after the forwards, and
    most calls were not descheduled (thread CPU >= 93% of wall); otherwise wait `wait_s`
    and retry (the calls of an earlier attempt were its warm-up: a retry times at once).
    After `attempts`, the attempt with the least slowdown stands (`quiet` False)."""
    tried: list[dict] = []
    warm = False  # `fn` ran in an earlier attempt

    def wait() -> None:
        if len(tried) < attempts:  # none after the last attempt
            time.sleep(wait_s)

    for _ in range(attempts):
        before = slowdown(reference_s(), baseline)
        if before > 1 + SLACK:
            tried.append({"slowdown": before, "seconds": None})
            wait()
            continue
        samples = call_times_s(fn, repeats, warmup=0 if warm else 2, grad=grad)
        warm = True
        after = slowdown(reference_s(), baseline)
        clean = [wall for wall, cpu in samples if cpu >= UNDISTURBED * wall]
        walls = clean if len(clean) * 2 > len(samples) else [wall for wall, _ in samples]
        tried.append({"slowdown": max(before, after), "seconds": statistics.median(walls)})
        if after <= 1 + SLACK and len(clean) * 2 > len(samples):
            return {"seconds": tried[-1]["seconds"], "quiet": True, "attempts": len(tried),
                    "slowdown": round(tried[-1]["slowdown"], 3)}
        wait()
    timed = [t for t in tried if t["seconds"] is not None]
    if not timed:  # never quiet enough to start: time it anyway
        samples = call_times_s(fn, repeats, grad=grad)
        timed = [{"slowdown": slowdown(reference_s(), baseline),
                  "seconds": statistics.median(w for w, _ in samples)}]
    best = min(timed, key=lambda t: t["slowdown"])
    return {"seconds": best["seconds"], "quiet": False, "attempts": len(tried),
            "slowdown": round(best["slowdown"], 3)}


def traced_ops(model: nn.Module, inputs: tuple) -> list[str]:
    """The eager-vocabulary op of every kernel one forward launches, in order."""
    with torch.no_grad(), trace_kernels() as trace:
        model(*inputs)
    return [op for op, *_ in trace]


def kernels_alone_s(model: nn.Module, inputs: tuple, repeats: int = 3) -> list[tuple[str, float]]:
    """(op, seconds) of every kernel of one forward, each replayed and timed alone (in-place
    kernels rerun on their own output)."""
    def run() -> list[tuple[str, float]]:
        with trace_kernels() as trace:
            model(*inputs)
        return [(op, time_torch_call(lambda f=fn, a=args, k=kwargs: f(*a, **k), repeats))
                for op, fn, args, kwargs in trace]

    return _one_thread(run)
