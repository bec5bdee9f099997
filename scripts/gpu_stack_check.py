"""Time what today's PyTorch stack runs on a real GPU, to hold perfcast's forecasts against.

Not a fit: these numbers are a check (issue 17's "judged on a real GPU with current
torch/transformers"); nothing here is read by perfcast. Run on a CUDA machine:

    python scripts/gpu_stack_check.py --out stack_check.json

Writes one JSON of rows {what, shape, dtype, ms, ...} and prints them. GPU times are CUDA-event
timings of many back-to-back calls (warm caches, no launch gaps for the kernels themselves);
`wall_ms` of a decode step is host wall time per call (what a generate() loop sees).
--tiny runs every case with small shapes on the CPU (to check the script, not to time).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
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


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tiny", action="store_true", help="small shapes on the CPU")
    args = parser.parse_args()
    device = "cpu" if args.tiny else "cuda"
    torch.manual_seed(0)
    meta = {"torch": torch.__version__, "device": torch.cuda.get_device_name()
            if device == "cuda" else "cpu"}
    rows = []
    for part in (gemms, attention, vector_ops, resnet50, hf_llama):
        try:
            rows += part(device, args.tiny)
        except Exception as exc:  # noqa: BLE001 - one part failing must not lose the others
            rows.append({"what": part.__name__, "error": f"{type(exc).__name__}: {exc}"})
        print(json.dumps(rows[-1]), flush=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    for row in rows:
        print(f"{row['what']:32s} {str(row.get('shape', '')):24s} {row.get('dtype', ''):9s} "
              f"{row['ms']:.4f} ms" if "ms" in row else row)


if __name__ == "__main__":
    main()
