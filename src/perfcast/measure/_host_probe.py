"""Eager PyTorch's host cost on this machine: the numbers behind a stack's `HostModel`.

An eager step is issued by the CPU one kernel at a time (Python, module `__call__`, ATen
dispatch, the CUDA launch); when the kernels are short the GPU waits on the CPU and the step
takes the host's time. This probe times that host work with models too small for their
kernels to matter (hidden 64), so what is measured is the host alone:

  torch_add_s / f_linear_s / module_call_s   one op on this device, back to back
  decoder_layer_s     one transformers LlamaDecoderLayer decode forward (one token, SDPA,
                      a DynamicCache)
  forward_s[L]        a whole LlamaForCausalLM forward of 16 tokens, last-token logits, L layers
  generate_token_s[L] HF generate()'s seconds per new token (greedy), L layers: the difference
                      of two generate() calls of 8 and 40 new tokens over 32, which removes the
                      prompt's forward and generate()'s set-up

Two layer counts give each whole-model cost as fixed + per-layer seconds (`per_layer`); the
fixed part of generate_token_s is generate()'s own per-token bookkeeping (logits processors,
stopping criteria, cache and attention-mask updates, the sync on the finished flag) plus the
embedding and head kernels. On a CUDA device every call ends in a synchronize, so the times are
wall times of host-bound steps. Imports torch and transformers only, so it also runs as a
script on a GPU machine without perfcast's other dependencies:

    python src/perfcast/measure/_host_probe.py --device cuda --out host.json
"""

from __future__ import annotations

import argparse
import inspect
import json
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["HIDDEN", "PROBE_LAYERS", "cpu_model", "generate_wall_s", "host_probe"]

HIDDEN, HEADS, INTER, VOCAB = 64, 4, 128, 256
CACHED = 16            # tokens in the cache before the timed decode calls
PROBE_LAYERS = (1, 5)  # layer counts of the whole-model probes (fixed + per-layer fit)
PROMPT, SHORT, LONG = 16, 8, 40


def cpu_model() -> str:
    """This machine's CPU model name (Linux /proc/cpuinfo, else platform's)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def per_call_s(fn: Callable[[], object], device: str, calls: int = 1000,
               repeats: int = 7) -> float:
    """Min over `repeats` of the mean wall seconds per call of `fn()`, each repeat ended by a
    synchronize (one untimed warm-up batch first)."""
    for _ in range(max(calls // 10, 2)):
        fn()
    _sync(device)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        _sync(device)
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def _config(layers: int):
    from transformers import LlamaConfig

    cfg = LlamaConfig(hidden_size=HIDDEN, num_attention_heads=HEADS, num_key_value_heads=HEADS,
                      intermediate_size=INTER, num_hidden_layers=layers, vocab_size=VOCAB,
                      max_position_embeddings=512, eos_token_id=VOCAB - 1,
                      pad_token_id=VOCAB - 1)
    cfg._attn_implementation = "sdpa"
    return cfg


def _ops_s(device: str, repeats: int) -> dict[str, float]:
    import torch
    from torch import nn
    from torch.nn import functional as F

    a, b = torch.randn(1, 8, device=device), torch.randn(1, 8, device=device)
    lin = nn.Linear(8, 8).to(device)
    with torch.no_grad():
        add = per_call_s(lambda: torch.add(a, b), device, repeats=repeats)
        linear = per_call_s(lambda: F.linear(a, lin.weight, lin.bias), device, repeats=repeats)
        module = per_call_s(lambda: lin(a), device, repeats=repeats) - linear
    return {"torch_add_s": add, "f_linear_s": linear, "module_call_s": module}


def _decoder_layer(device: str, repeats: int, calls: int = 200) -> tuple[float, int | None]:
    """One decode forward of a LlamaDecoderLayer; each repeat starts a fresh DynamicCache of
    CACHED tokens and grows it by `calls` (the cat of a few hundred 64-wide rows is free)."""
    import torch
    from transformers.cache_utils import DynamicCache
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    cfg = _config(1)
    dtype = _dtype(device)
    layer = LlamaDecoderLayer(cfg, layer_idx=0).to(device, dtype).eval()
    rope = LlamaRotaryEmbedding(cfg).to(device)
    prefix = torch.randn(1, CACHED, HIDDEN, device=device, dtype=dtype)
    x = torch.randn(1, 1, HIDDEN, device=device, dtype=dtype)
    # transformers renamed the layer's cache keyword (past_key_values -> cache); a wrong name
    # would be swallowed by **kwargs and time a layer without its cache
    key = "cache" if "cache" in inspect.signature(layer.forward).parameters else \
        "past_key_values"
    best = float("inf")
    with torch.no_grad():
        for _ in range(repeats + 1):  # the first repeat warms up
            cache = DynamicCache(config=cfg)
            pos = torch.arange(CACHED, device=device)[None]
            layer(prefix, position_embeddings=rope(prefix, pos), use_cache=True,
                  position_ids=pos, **{key: cache})
            pos = torch.tensor([[CACHED]], device=device)
            emb = rope(x, pos)
            _sync(device)
            start = time.perf_counter()
            for _ in range(calls):
                layer(x, position_embeddings=emb, use_cache=True, position_ids=pos,
                      **{key: cache})
            _sync(device)
            best = min(best, (time.perf_counter() - start) / calls)
            if cache.get_seq_length() != CACHED + calls:
                raise RuntimeError(f"the layer did not grow its cache ({key}=)")
        kernels = cuda_kernels(lambda: layer(x, position_embeddings=emb, use_cache=True,
                                             position_ids=pos, **{key: cache})
                               ) if device == "cuda" else None
    return best, kernels


def _dtype(device: str):
    """The dtype a model runs in on `device`: bf16 on a GPU (SDPA's flash kernels, as a user
    runs it), fp32 on a CPU."""
    import torch

    return torch.bfloat16 if device == "cuda" else torch.float32


def _model(layers: int, device: str):
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(_config(layers)).to(device, _dtype(device)).eval()


def cuda_kernels(fn: Callable[[], object]) -> int:
    """GPU kernels one call of `fn` launches (torch.profiler's CUDA kernel events)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def _forward(layers: int, device: str, repeats: int) -> tuple[float, int | None]:
    """Seconds of one forward (16 tokens, last-token logits) and, on CUDA, its kernels."""
    import torch

    model = _model(layers, device)
    ids = torch.randint(0, VOCAB - 1, (1, PROMPT), device=device)
    with torch.inference_mode():
        def call():
            return model(ids, use_cache=False, logits_to_keep=1)
        kernels = cuda_kernels(call) if device == "cuda" else None
        return per_call_s(call, device, calls=50, repeats=repeats), kernels


def _decode_kernels(layers: int, device: str) -> int:
    """GPU kernels of one decode forward (one token over a DynamicCache of PROMPT tokens,
    last-token logits), as generate() runs it."""
    import torch

    model = _model(layers, device)
    ids = torch.randint(0, VOCAB - 1, (1, PROMPT), device=device)
    with torch.inference_mode():
        cache = model(ids, use_cache=True).past_key_values
        token = ids[:, -1:]
        return cuda_kernels(lambda: model(token, past_key_values=cache, use_cache=True,
                                          logits_to_keep=1))


def generate_wall_s(model, ids, new: int, device: str, **generate_options: Any) -> float:
    """Wall seconds of one greedy HF generate() of exactly `new` tokens after `ids`
    (synchronized; an early stop is an error, not a shorter time)."""
    import torch

    _sync(device)
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                             min_new_tokens=new, do_sample=False, **generate_options)
    _sync(device)
    if out.shape[1] != ids.shape[1] + new:
        raise RuntimeError(f"generate() stopped early: {tuple(out.shape)}")
    return time.perf_counter() - start


def _generate_token_s(layers: int, device: str, repeats: int) -> float:
    import torch

    model = _model(layers, device)
    ids = torch.randint(0, VOCAB - 1, (1, PROMPT), device=device)

    def wall_s(new: int) -> float:
        return generate_wall_s(model, ids, new, device)

    wall_s(SHORT)  # warm-up
    short = min(wall_s(SHORT) for _ in range(repeats))
    long = min(wall_s(LONG) for _ in range(repeats))
    return (long - short) / (LONG - SHORT)


def _per_layer(values: dict[int, float]) -> dict[str, float]:
    """fixed + per-layer seconds through the two PROBE_LAYERS points."""
    lo, hi = PROBE_LAYERS
    slope = (values[hi] - values[lo]) / (hi - lo)
    return {"fixed_s": values[lo] - slope * lo, "per_layer_s": slope}


def host_probe(device: str = "cpu", repeats: int = 5) -> dict:
    """Every probe of the module docstring on `device` (cpu or cuda), single CPU thread."""
    import torch
    import transformers

    torch.set_num_threads(1)
    layer_s, layer_kernels = _decoder_layer(device, repeats)
    forward_runs = {n: _forward(n, device, repeats) for n in PROBE_LAYERS}
    forward = {n: s for n, (s, _) in forward_runs.items()}
    generate = {n: _generate_token_s(n, device, repeats) for n in PROBE_LAYERS}
    return {
        "schema": 1,
        "about": "Eager PyTorch host cost (perfcast.measure._host_probe): hidden-64 Llama, "
                 "single CPU thread, min over repeats of the mean wall seconds per call.",
        "device": device,
        "device_name": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "cpu": cpu_model(), "torch": torch.__version__,
        "transformers": transformers.__version__, "python": platform.python_version(),
        "model": {"hidden": HIDDEN, "heads": HEADS, "intermediate": INTER, "vocab": VOCAB,
                  "attention": "sdpa", "cached_tokens": CACHED, "prompt_tokens": PROMPT,
                  "new_tokens": [SHORT, LONG]},
        **_ops_s(device, repeats),
        "dtype": str(_dtype(device)).removeprefix("torch."),
        "decoder_layer_s": layer_s, "decoder_layer_kernels": layer_kernels,
        "forward_s": {str(n): s for n, s in forward.items()},
        "forward_per_layer": _per_layer(forward),
        "forward_kernels": ({str(n): k for n, (_, k) in forward_runs.items()}
                            if device == "cuda" else None),
        "decode_kernels": ({str(n): _decode_kernels(n, device) for n in PROBE_LAYERS}
                           if device == "cuda" else None),
        "generate_token_s": {str(n): s for n, s in generate.items()},
        "generate_per_layer": _per_layer(generate),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    result = host_probe(args.device, args.repeats)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
