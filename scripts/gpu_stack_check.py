"""Time what today's PyTorch stack runs on a real GPU, to hold perfcast's forecasts against.

Not a fit: these numbers are a check (issue 17's "judged on a real GPU with current
torch/transformers"); nothing here is read by perfcast's fitting. Run on a CUDA machine (the
script imports only torch, transformers and the standard library):

    python scripts/gpu_stack_check.py --out stack_check.json [--parts kernel_grid,hf_generate]

Writes one JSON {meta, parts_done, complete, rows} after every part (a timeout keeps what was
done) and prints a summary. Legacy parts give rows {what, shape, dtype, ms, ...}: CUDA-event
timings of many back-to-back calls; `wall_ms` of a decode step is host wall time per call.
`kernel_grid` rows carry perfcast's measurement-store columns (src/perfcast/measure/_schema.py,
FLOPs and bytes as scripts/build_measurement_store.py counts AIConfigurator rows), timed by
CUDA-graph replay, so perfcast can price them later. `hf_generate` is HF generate()'s
per-token time. --tiny runs every case with small shapes on the CPU (to check the script, not
to time).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F

LLAMA_7B = dict(hidden_size=4096, intermediate_size=11008, num_attention_heads=32,
                num_key_value_heads=32, num_hidden_layers=32, vocab_size=32000,
                max_position_embeddings=4096, rms_norm_eps=1e-5)
TINY = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=4,
            num_hidden_layers=2, vocab_size=256, max_position_embeddings=512, rms_norm_eps=1e-5)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def gpu_ms(fn: Callable[[], object], device: str, iters: int = 50, warmup: int = 5) -> float:
    """Mean milliseconds per call of `fn`, back to back (CUDA events on a GPU)."""
    for _ in range(warmup):
        fn()
    _sync(device)
    if device != "cuda":
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - start) * 1e3 / iters
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return begin.elapsed_time(end) / iters


def gemms(device: str, tiny: bool) -> list[dict]:
    rows = []
    shapes = [(1, 4096, 12288), (16, 4096, 4096), (128, 4096, 11008), (2048, 4096, 4096),
              (2048, 4096, 12288), (2048, 11008, 4096), (8192, 4096, 4096)]
    for m, k, n in ([(4, 32, 48)] if tiny else shapes):
        x = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        w = torch.randn(n, k, device=device, dtype=torch.bfloat16)
        rows.append({"what": "linear", "shape": [m, k, n], "dtype": "bf16",
                     "ms": gpu_ms(lambda x=x, w=w: F.linear(x, w), device)})
    return rows


def attention(device: str, tiny: bool) -> list[dict]:
    """Prefill (causal, q = kv length) through SDPA's default backend and the materialised
    form; decode (one query over a KV cache) through SDPA."""
    rows = []
    heads, dim = (4, 16) if tiny else (32, 128)
    for seq in ([32] if tiny else [512, 2048, 8192]):
        q, k, v = (torch.randn(1, heads, seq, dim, device=device, dtype=torch.bfloat16)
                   for _ in range(3))
        rows.append({"what": "attention_prefill_sdpa", "shape": [1, heads, seq, dim],
                     "dtype": "bf16", "ms": gpu_ms(
                         lambda q=q, k=k, v=v: F.scaled_dot_product_attention(
                             q, k, v, is_causal=True), device)})
        mask = torch.full((seq, seq), float("-inf"), device=device).triu(1).to(torch.bfloat16)

        def eager(q=q, k=k, v=v, mask=mask):
            scores = (q @ k.transpose(-1, -2)) / dim ** 0.5 + mask
            return torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v

        rows.append({"what": "attention_prefill_eager", "shape": [1, heads, seq, dim],
                     "dtype": "bf16", "ms": gpu_ms(eager, device)})
    for batch, ctx in ([(2, 32)] if tiny else [(1, 1024), (1, 4096), (16, 1024), (16, 4096),
                                               (64, 2048)]):
        q = torch.randn(batch, heads, 1, dim, device=device, dtype=torch.bfloat16)
        k, v = (torch.randn(batch, heads, ctx, dim, device=device, dtype=torch.bfloat16)
                for _ in range(2))
        rows.append({"what": "attention_decode_sdpa", "shape": [batch, heads, ctx, dim],
                     "dtype": "bf16", "ms": gpu_ms(
                         lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v),
                         device)})
    return rows


def vector_ops(device: str, tiny: bool) -> list[dict]:
    rows = []
    hidden, inter = (64, 128) if tiny else (4096, 11008)
    for tokens in ([8] if tiny else [1, 2048, 8192]):
        x = torch.randn(tokens, hidden, device=device, dtype=torch.bfloat16)
        g = torch.randn(tokens, 2 * inter, device=device, dtype=torch.bfloat16)
        w = torch.ones(hidden, device=device, dtype=torch.bfloat16)
        cases = {"rms_norm": lambda x=x, w=w: F.rms_norm(x, (hidden,), w, 1e-5),
                 "layer_norm": lambda x=x, w=w: F.layer_norm(x, (hidden,), w),
                 "gelu": lambda x=x: F.gelu(x),
                 "silu_mul": lambda g=g: F.silu(g[:, :inter]) * g[:, inter:],
                 "add": lambda x=x: x + x}
        for name, fn in cases.items():
            rows.append({"what": name, "shape": [tokens, hidden], "dtype": "bf16",
                         "ms": gpu_ms(fn, device)})
    return rows


def hf_llama(device: str, tiny: bool) -> list[dict]:
    """A Llama-2-7B-shaped HF model (random weights, bf16): prefill forward per attention
    implementation, and one eager decode step over a cache (host wall time per token)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    rows = []
    for impl in ("sdpa", "eager"):
        config = LlamaConfig(**(TINY if tiny else LLAMA_7B), attn_implementation=impl)
        with torch.device(device):
            model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
        for seq in ([16] if tiny else [512, 2048]):
            ids = torch.randint(0, config.vocab_size, (1, seq), device=device)
            with torch.inference_mode():
                ms = gpu_ms(lambda ids=ids, m=model: m(ids, use_cache=False), device, iters=10,
                            warmup=2)
            rows.append({"what": f"hf_llama7b_prefill_{impl}", "shape": [1, seq],
                         "dtype": "bf16", "ms": ms, "transformers": _version("transformers")})
        if impl == "sdpa":
            rows.append(_decode_step(model, config, device, tiny))
        model = None  # free the weights before the next implementation's copy
        if device == "cuda":
            torch.cuda.empty_cache()
    return rows


def _decode_step(model, config, device: str, tiny: bool) -> dict:
    """One generate()-style decode step: a token over a 512-token cache, eager."""
    context = 16 if tiny else 512
    ids = torch.randint(0, config.vocab_size, (1, context), device=device)
    with torch.inference_mode():
        out = model(ids, use_cache=True)
        cache, token = out.past_key_values, ids[:, -1:]
        steps = 5 if tiny else 50
        for _ in range(3):
            model(token, past_key_values=cache, use_cache=True)
        _sync(device)
        start = time.perf_counter()
        for _ in range(steps):
            model(token, past_key_values=cache, use_cache=True)
        _sync(device)
    return {"what": "hf_llama7b_decode_step_eager", "shape": [1, context], "dtype": "bf16",
            "ms": (time.perf_counter() - start) * 1e3 / steps, "timing": "host wall"}


def resnet50(device: str, tiny: bool) -> list[dict]:
    try:
        import torchvision
    except ImportError:
        return [{"what": "resnet50", "skipped": "no torchvision"}]
    rows = []
    batch, size = (2, 64) if tiny else (32, 224)
    model = torchvision.models.resnet50().to(device).eval().to(memory_format=torch.channels_last)
    x = torch.randn(batch, 3, size, size, device=device).to(memory_format=torch.channels_last)
    for dtype in (torch.float32, torch.bfloat16):
        with torch.inference_mode(), torch.autocast(device, dtype=dtype,
                                                    enabled=dtype != torch.float32):
            ms = gpu_ms(lambda: model(x), device, iters=10 if tiny else 30)
        rows.append({"what": "resnet50_forward", "shape": [batch, 3, size, size],
                     "dtype": str(dtype).removeprefix("torch."), "ms": ms,
                     "tf32": torch.backends.cuda.matmul.allow_tf32})
    return rows


# ---------------------------------------------------------------------------------------------
# kernel_grid: rows in perfcast's measurement-store schema, priced by perfcast later.
STORE_KEYS = ("family", "op", "dtype", "weight_dtype", "kv_dtype", "b", "m", "n", "k", "batch",
              "heads", "kv_heads", "head_dim", "q_len", "kv_len", "window", "flops", "bytes",
              "timing", "latency_s")
ELEM_BYTES = {"bf16": 2, "fp8": 1}
GEMM_NK = [(4096, 4096), (12288, 4096), (4096, 11008), (22016, 4096), (1024, 8192),
           (57344, 8192), (8192, 28672)]
GEMM_M_BF16 = [1, 8, 32, 128, 512, 2048, 8192]
GEMM_M_FP8 = [16, 128, 1024, 4096]
PREFILL = [(batch, seq, heads, kvh) for batch in (1, 4) for seq in (512, 2048, 8192)
           for heads, kvh in ((32, 32), (32, 8), (64, 8))]
DECODE = [(batch, kv_len, heads, kvh) for batch in (1, 8, 32, 128) for kv_len in (512, 2048, 8192)
          for heads, kvh in ((32, 8), (32, 32))]
HEAD_DIM = 128
TINY_NK, TINY_M_BF16, TINY_M_FP8 = [(48, 32), (64, 96)], [1, 8], [16]
TINY_PREFILL = [(1, 32, 4, 4), (2, 32, 4, 2)]
TINY_DECODE = [(1, 32, 4, 2), (2, 64, 4, 4)]
TINY_HEAD_DIM = 16
L2_BYTES_DEFAULT = 50e6    # H100 / H200 L2
COPY_CAP_BYTES = 8e9       # most memory the distinct input copies may take together
MIN_REPS, MAX_COPIES, REPLAYS = 20, 128, 5


def _store_row(family: str, op: str, dtype: str, **cols) -> dict:
    """A kernel_grid row: every store column (None where it does not apply), then extras."""
    row = dict.fromkeys(STORE_KEYS)
    row.update(what="kernel_grid", family=family, op=op, dtype=dtype, weight_dtype=dtype,
               kv_dtype="")
    row.update(cols)
    return {"what": row.pop("what"), **row}


def gemm_row(op: str, dtype: str, m: int, n: int, k: int) -> dict:
    """[m, k] x [k, n] with a bf16 output; flops = 2mnk, bytes = mk·e + nk·e + mn·2 (as
    scripts/build_measurement_store.py `aic_gemm`)."""
    e = ELEM_BYTES[dtype]
    return _store_row("gemm", op, dtype, b=1, m=m, n=n, k=k, flops=2 * m * n * k,
                      bytes=m * k * e + n * k * e + m * n * 2)


def prefill_row(op: str, batch: int, seq: int, heads: int, kvh: int, hd: int) -> dict:
    """Causal self-attention over `seq` tokens, bf16 (as `aic_attention` context rows):
    b = batch·heads, m = n = seq, k = head_dim; flops = 4·batch·heads·hd·pairs with causal
    pairs = seq(seq+1)/2 (perfcast.ops.attended_keys); bytes = Q,K,V read + O write + a KV
    write, the store's convention (SDPA itself writes no KV cache)."""
    e = ELEM_BYTES["bf16"]
    pairs = seq * (seq + 1) / 2
    return _store_row("attn_prefill", op, "bf16", kv_dtype="bf16", b=batch * heads, m=seq, n=seq,
                      k=hd, batch=batch, heads=heads, kv_heads=kvh, head_dim=hd, q_len=seq,
                      kv_len=seq, window=0, flops=4 * batch * heads * hd * pairs,
                      bytes=batch * seq * (heads + 2 * kvh) * hd * e + batch * seq * heads * hd * e
                      + batch * seq * 2 * kvh * hd * e)


def decode_row(op: str, batch: int, kv_len: int, heads: int, kvh: int, hd: int) -> dict:
    """One query token over `kv_len` cached keys, bf16 (as `aic_attention` generation rows):
    b = batch·heads, m = 1, n = kv_len, k = hd; flops = 4·batch·heads·hd·kv_len; bytes = K,V
    read + Q read and O write."""
    e = ELEM_BYTES["bf16"]
    return _store_row("attn_decode", op, "bf16", kv_dtype="bf16", b=batch * heads, m=1,
                      n=kv_len, k=hd, batch=batch, heads=heads, kv_heads=kvh, head_dim=hd,
                      q_len=1, kv_len=kv_len, window=0, flops=4 * batch * heads * hd * kv_len,
                      bytes=batch * kv_len * 2 * kvh * hd * e + 2 * batch * heads * hd * 2)


def _copies(copy_bytes: float, device: str) -> int:
    """Distinct input copies to cycle through so that together they exceed twice the L2 (the
    weights of a small GEMM must come from HBM, as in a model), at most COPY_CAP_BYTES."""
    if device != "cuda":
        return 2
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or L2_BYTES_DEFAULT
    wanted = math.ceil(2 * l2 / copy_bytes) + 1
    return max(1, min(wanted, int(COPY_CAP_BYTES // copy_bytes), MAX_COPIES))


def _graph_latency_s(calls: list[Callable[[], object]]) -> tuple[float, int]:
    """Seconds per call: max(MIN_REPS, copies) calls cycling the copies, captured into one
    CUDA graph after warm-up on a side stream, replayed REPLAYS times between CUDA events."""
    reps = max(MIN_REPS, len(calls))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(max(3, len(calls))):  # warm-up: cuBLAS heuristics, lazy init, clocks
            calls[i % len(calls)]()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(reps):
            calls[i % len(calls)]()
    for _ in range(2):  # warm replays
        graph.replay()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(REPLAYS):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    elapsed_s = begin.elapsed_time(end) / 1e3
    del graph
    return elapsed_s / (reps * REPLAYS), reps


def _event_latency_s(calls: list[Callable[[], object]]) -> float:
    """Fallback when capture fails: seconds per call launched eagerly between CUDA events."""
    reps = max(MIN_REPS, len(calls))
    for fn in calls:
        fn()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for i in range(reps * REPLAYS):
        calls[i % len(calls)]()
    end.record()
    torch.cuda.synchronize()
    return begin.elapsed_time(end) / 1e3 / (reps * REPLAYS)


def _cpu_latency_s(calls: list[Callable[[], object]], reps: int = 5) -> float:
    for fn in calls:
        fn()
    start = time.perf_counter()
    for i in range(reps):
        calls[i % len(calls)]()
    return (time.perf_counter() - start) / reps


def _measure(row: dict, copy_bytes: float, build: Callable[[int], tuple[list, dict]],
             device: str) -> dict:
    """Time one case: `build(copies)` gives the calls (one per input copy) and row changes
    (such as a fallback op name). A failing case gives an error row, not a crash."""
    try:
        copies = _copies(copy_bytes, device)
        calls, changes = build(copies)
        row = {**row, **changes, "copies": copies}
        if device != "cuda":
            return {**row, "timing": "cpu_wallclock", "latency_s": _cpu_latency_s(calls)}
        try:
            latency_s, reps = _graph_latency_s(calls)
            return {**row, "timing": "cuda_graph", "latency_s": latency_s, "reps": reps}
        except Exception as exc:  # noqa: BLE001 - an op that will not capture is timed eagerly
            return {**row, "timing": "cuda_event", "latency_s": _event_latency_s(calls),
                    "graph_error": f"{type(exc).__name__}: {exc}"[:300]}
    except Exception as exc:  # noqa: BLE001 - one case failing must not lose the others
        return {**row, "latency_s": None, "error": f"{type(exc).__name__}: {exc}"[:300]}


def _rand(device: str, dtype: torch.dtype, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, device=device, dtype=torch.bfloat16).to(dtype)


def _gemm_bf16(device: str, m: int, n: int, k: int) -> dict:
    def build(copies: int):
        pairs = [(_rand(device, torch.bfloat16, m, k), _rand(device, torch.bfloat16, n, k))
                 for _ in range(copies)]
        return [partial(F.linear, x, w) for x, w in pairs], {}

    return _measure(gemm_row("torch.nn.functional.linear", "bf16", m, n, k), 2 * (m + n) * k,
                    build, device)


def _gemm_fp8(device: str, m: int, n: int, k: int) -> dict:
    """torch._scaled_mm: e4m3 [m, k] row-major x e4m3 [k, n] column-major (W [n, k] row-major,
    transposed), per-tensor fp32 scales, bf16 out."""
    def build(copies: int):
        scale = torch.ones((), device=device, dtype=torch.float32)
        pairs = [(_rand(device, torch.float8_e4m3fn, m, k),
                  _rand(device, torch.float8_e4m3fn, n, k)) for _ in range(copies)]
        return [partial(torch._scaled_mm, a, w.t(), scale_a=scale, scale_b=scale,
                        out_dtype=torch.bfloat16) for a, w in pairs], {}

    return _measure(gemm_row("torch._scaled_mm", "fp8", m, n, k), (m + n) * k, build, device)


def _prefill(device: str, batch: int, seq: int, heads: int, kvh: int, hd: int) -> dict:
    """Causal SDPA forced onto the flash backend; GQA through enable_gqa, or K/V repeated to
    the query heads (op sdpa_flash_repeat_kv, kv_heads = heads: what the kernel read) when
    the backend refuses it."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def call(q, k, v, gqa):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)

    def build(copies: int):
        qkv = [tuple(_rand(device, torch.bfloat16, batch, h, seq, hd) for h in (heads, kvh, kvh))
               for _ in range(copies)]
        gqa, changes = heads != kvh, {}
        if gqa:
            try:
                call(*qkv[0], True)
            except RuntimeError:
                qkv = [(q, k.repeat_interleave(heads // kvh, 1), v.repeat_interleave(heads // kvh,
                        1)) for q, k, v in qkv]
                gqa, changes = False, {**prefill_row("sdpa_flash_repeat_kv", batch, seq, heads,
                                                     heads, hd), "model_kv_heads": kvh}
        return [partial(call, q, k, v, gqa) for q, k, v in qkv], changes

    return _measure(prefill_row("sdpa_flash", batch, seq, heads, kvh, hd),
                    2 * batch * seq * (heads + 2 * kvh) * hd, build, device)


def _sdpa_choice(q, k, v, gqa: bool) -> str:
    """Which backend SDPA's default dispatch picks for these inputs (best effort)."""
    from torch.nn.attention import SDPBackend

    try:
        return SDPBackend(torch._fused_sdp_choice(q, k, v, enable_gqa=gqa)).name.lower()
    except Exception:  # noqa: BLE001 - a private helper: absent or changed means unknown
        return "unknown"


def _decode(device: str, batch: int, kv_len: int, heads: int, kvh: int, hd: int) -> dict:
    """One query token over a bf16 KV cache through SDPA's default backend (not causal: the
    token sees every cached key)."""
    gqa = heads != kvh

    def build(copies: int):
        qkv = [(_rand(device, torch.bfloat16, batch, heads, 1, hd),
                _rand(device, torch.bfloat16, batch, kvh, kv_len, hd),
                _rand(device, torch.bfloat16, batch, kvh, kv_len, hd)) for _ in range(copies)]
        return ([partial(F.scaled_dot_product_attention, q, k, v, enable_gqa=gqa)
                 for q, k, v in qkv], {"backend": _sdpa_choice(*qkv[0], gqa)})

    return _measure(decode_row("sdpa_default", batch, kv_len, heads, kvh, hd),
                    2 * batch * (heads + 2 * kvh * kv_len) * hd, build, device)


def kernel_grid(device: str, tiny: bool) -> list[dict]:
    """GEMMs (bf16 F.linear, fp8 torch._scaled_mm) and attention (flash prefill, default-
    backend decode) as measurement-store rows, each timed by CUDA-graph replay."""
    nk = TINY_NK if tiny else GEMM_NK
    hd = TINY_HEAD_DIM if tiny else HEAD_DIM
    groups = {
        "gemm bf16": [partial(_gemm_bf16, device, m, n, k)
                      for m in (TINY_M_BF16 if tiny else GEMM_M_BF16) for n, k in nk],
        "gemm fp8": [partial(_gemm_fp8, device, m, n, k)
                     for m in (TINY_M_FP8 if tiny else GEMM_M_FP8) for n, k in nk],
        "attn_prefill": [partial(_prefill, device, *case, hd)
                         for case in (TINY_PREFILL if tiny else PREFILL)],
        "attn_decode": [partial(_decode, device, *case, hd)
                        for case in (TINY_DECODE if tiny else DECODE)],
    }
    rows = []
    for name, cases in groups.items():
        start = time.perf_counter()
        rows += [case() for case in cases]
        if device == "cuda":
            torch.cuda.empty_cache()
        print(f"kernel_grid {name}: {len(cases)} cases in {time.perf_counter() - start:.1f} s",
              file=sys.stderr, flush=True)
    return rows


def hf_generate(device: str, tiny: bool) -> list[dict]:
    """HF generate() on a Llama-2-7B-shaped model (random weights, bf16, sdpa), greedy, a
    512-token prompt: per-token ms = (t(64 new) - t(16 new)) / 48, which removes the prefill
    and fixed costs. Host wall time, best of two runs each."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**(TINY if tiny else LLAMA_7B), attn_implementation="sdpa")
    prompt, short, long = (16, 4, 16) if tiny else (512, 16, 64)
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # build the weights in bf16: no fp32 copy
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config).eval()
    finally:
        torch.set_default_dtype(default_dtype)
    ids = torch.randint(0, config.vocab_size, (1, prompt), device=device)

    def wall_s(new: int) -> float:
        _sync(device)
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                                 min_new_tokens=new, do_sample=False,
                                 pad_token_id=config.eos_token_id)
        _sync(device)
        assert out.shape[1] == prompt + new, out.shape
        return time.perf_counter() - start

    wall_s(short)  # warm-up
    t_short, t_long = (min(wall_s(new) for _ in range(2)) for new in (short, long))
    model = None
    if device == "cuda":
        torch.cuda.empty_cache()
    return [{"what": "hf_generate_per_token", "shape": [1, prompt], "dtype": "bf16",
             "ms": (t_long - t_short) * 1e3 / (long - short), f"t{short}_s": t_short,
             f"t{long}_s": t_long, "new_tokens": [short, long], "attn_implementation": "sdpa",
             "timing": "host wall", "transformers": _version("transformers")}]


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


PARTS: dict[str, Callable[[str, bool], list[dict]]] = {
    fn.__name__: fn for fn in (gemms, attention, vector_ops, resnet50, hf_llama, kernel_grid,
                               hf_generate)}


def _parts(text: str) -> list[str]:
    """--parts: a comma list of part names, run in the order given."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in PARTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown part(s) {unknown}; choose from {list(PARTS)}")
    return names


def _meta(device: str, tiny: bool, parts: list[str]) -> dict:
    meta = {"torch": torch.__version__, "cuda": torch.version.cuda, "tiny": tiny,
            "parts": parts, "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
            "kernel_grid_timing": f"cuda_graph: >= {MIN_REPS} calls cycling distinct input "
            f"copies (> 2x L2, <= {COPY_CAP_BYTES:.0e} B) per graph, {REPLAYS} replays"}
    try:
        meta["transformers"] = _version("transformers")
    except Exception:  # noqa: BLE001 - the other parts run without transformers
        meta["transformers"] = None
    return meta


def _write(path: Path, meta: dict, done: list[str], rows: list[dict], complete: bool) -> None:
    """Write the JSON atomically, so an interrupted run leaves the last whole file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"meta": meta, "parts_done": done, "complete": complete,
                               "rows": rows}, indent=1) + "\n")
    os.replace(tmp, path)


def _summary(rows: list[dict]) -> list[str]:
    """One line per legacy row, one per kernel_grid (family, op, dtype) group."""
    lines, groups = [], {}
    for row in rows:
        if row.get("what") == "kernel_grid" and "family" in row:
            groups.setdefault((row["family"], row["op"], row["dtype"]), []).append(row)
        elif "ms" in row:
            lines.append(f"{row['what']:32s} {str(row.get('shape', '')):24s} "
                         f"{row.get('dtype', ''):9s} {row['ms']:.4f} ms")
        else:
            lines.append(json.dumps(row))
    for (family, op, dtype), group in groups.items():
        times = [r["latency_s"] for r in group if r.get("latency_s")]
        span = f"{min(times) * 1e6:.1f}..{max(times) * 1e6:.1f} us" if times else "no times"
        timings = sorted({str(r.get("timing")) for r in group})
        lines.append(f"kernel_grid {family:12s} {op:28s} {dtype:4s} {len(group):3d} rows "
                     f"{len(group) - len(times)} errors {span} {timings}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tiny", action="store_true", help="small shapes on the CPU")
    parser.add_argument("--parts", type=_parts, default=list(PARTS),
                        help=f"comma list of parts to run (default all: {','.join(PARTS)})")
    args = parser.parse_args()
    device = "cpu" if args.tiny else "cuda"
    rows = run_parts(PARTS, args.parts, device, args.tiny, args.out,
                     _meta(device, args.tiny, args.parts))
    print("\n".join(_summary(rows)))


def check_main(doc: str, parts: dict[str, Callable[[str, bool], list[dict]]], meta: dict,
               show: Callable[[dict], dict] = lambda row: row) -> None:
    """The command line of a GPU check built on run_parts (scripts/gpu_host_check.py,
    scripts/gpu_train_check.py): --out, --tiny, --parts; `meta` joins the run's torch, CUDA
    and device; each row is printed as JSON (`show` picks what)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tiny", action="store_true", help="small shapes on the CPU")
    parser.add_argument("--parts", default=",".join(parts))
    args = parser.parse_args()
    device = "cpu" if args.tiny else "cuda"
    meta = {"torch": torch.__version__, "cuda": torch.version.cuda, "tiny": args.tiny,
            "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
            "cpu_count": os.cpu_count(), **meta}
    for row in run_parts(parts, args.parts.split(","), device, args.tiny, args.out, meta):
        print(json.dumps(show(row)))


def run_parts(parts: dict[str, Callable[[str, bool], list[dict]]], names: list[str],
              device: str, tiny: bool, out: Path, meta: dict) -> list[dict]:
    """Run the named parts in order, writing the JSON after each (also used by
    scripts/gpu_host_check.py); a part that fails leaves an error row, not a lost run."""
    rows, done = [], []
    for name in names:
        torch.manual_seed(0)  # each part draws the same inputs whichever parts run
        start = time.perf_counter()
        try:
            rows += parts[name](device, tiny)
        except Exception as exc:  # noqa: BLE001 - one part failing must not lose the others
            rows.append({"what": name, "error": f"{type(exc).__name__}: {exc}"})
        done.append(name)
        print(f"part {name} done in {time.perf_counter() - start:.1f} s", file=sys.stderr,
              flush=True)
        _write(out, meta, done, rows, complete=len(done) == len(names))
    return rows


if __name__ == "__main__":
    main()
