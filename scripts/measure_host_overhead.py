"""Measure eager PyTorch's host cost per op on this machine's CPU (the `hf-transformers` stack's
host model, perfcast.specs.HostModel).

Single thread, tiny tensors (compute negligible), `min` over repeats of the mean per call:
  torch_add_s      torch.add of two [1, 8] tensors (Python -> ATen dispatch -> kernel)
  f_linear_s       torch.nn.functional.linear [1, 8] x [8, 8]
  module_call_s    nn.Linear(x) - F.linear(x): the nn.Module __call__ overhead
  decoder_layer_s  one transformers LlamaDecoderLayer forward (hidden 64, SDPA, one token over
                   a DynamicCache of 16-216 tokens: what a decode step runs per layer)
The per-kernel dispatch cost of the hf-transformers stack is decoder_layer_s divided by the
kernels perfcast's op table has in one decode layer (`eager_ops(..., attention="sdpa",
mode="decode")`), plus the host side of cudaLaunchKernel, which a CPU build cannot time:
CUDA_LAUNCH_S, a literature value (Gray, "Getting Started with CUDA Graphs", NVIDIA Technical
Blog 2019: 3.8 us per launch-bound kernel without graphs on V100/Xeon, of which about
2-4 us is the launch itself).

Writes src/perfcast/compose/data/host_eager_torch.json (values, CPU, versions, date).
Run: python scripts/measure_host_overhead.py [--out PATH] [--repeats N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import time
from pathlib import Path

import torch
import transformers
from torch import nn
from torch.nn import functional as F
from transformers import LlamaConfig
from transformers.cache_utils import DynamicCache
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

from perfcast.ops import eager_ops
from perfcast.specs import ModelSpec

OUT = Path(__file__).resolve().parents[1] / "src/perfcast/compose/data/host_eager_torch.json"
CUDA_LAUNCH_S = 3.0e-6  # host side of cudaLaunchKernel (module docstring)
HIDDEN, HEADS, INTER, CACHED = 64, 4, 128, 16


def per_call_s(fn, calls: int = 2000, repeats: int = 7) -> float:
    """Min over `repeats` of the mean seconds per call of `fn()` (warm: one untimed batch)."""
    for _ in range(calls // 10):
        fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _decoder_layer_s(repeats: int, calls: int = 200) -> float:
    """One LlamaDecoderLayer forward for one new token; each repeat starts from a fresh
    DynamicCache of CACHED tokens and grows it by `calls` tokens (the torch.cat of a few
    hundred 64-wide rows costs nothing next to the dispatch)."""
    cfg = LlamaConfig(hidden_size=HIDDEN, num_attention_heads=HEADS, num_key_value_heads=HEADS,
                      intermediate_size=INTER, num_hidden_layers=1, vocab_size=128)
    cfg._attn_implementation = "sdpa"
    layer = LlamaDecoderLayer(cfg, layer_idx=0).eval()
    rope = LlamaRotaryEmbedding(cfg)
    prefix = torch.randn(1, CACHED, HIDDEN)
    x = torch.randn(1, 1, HIDDEN)
    best = float("inf")
    with torch.no_grad():
        for _ in range(repeats + 1):  # the first repeat warms up
            cache = DynamicCache(config=cfg)
            pos = torch.arange(CACHED)[None]
            layer(prefix, position_embeddings=rope(prefix, pos), cache=cache, use_cache=True,
                  position_ids=pos)
            pos = torch.tensor([[CACHED]])
            emb = rope(x, pos)
            start = time.perf_counter()
            for _ in range(calls):
                layer(x, position_embeddings=emb, cache=cache, use_cache=True,
                      position_ids=pos)
            best = min(best, (time.perf_counter() - start) / calls)
    return best


def _layer_kernels() -> int:
    """Kernels per decoder layer in perfcast's hf-transformers (SDPA) decode op table."""
    spec = ModelSpec(name="tiny-llama", model_type="llama", hidden_size=HIDDEN,
                     num_layers=1, num_heads=HEADS, num_kv_heads=HEADS, head_dim=HIDDEN // HEADS,
                     intermediate_size=INTER, vocab_size=128, position="rope", norm="rmsnorm",
                     activation="silu", gated_mlp=True)
    ops = eager_ops(spec, 1, 1, "decode", attention="sdpa", context=CACHED)
    return int(ops.loc[ops["layer"] == "layer", "count"].sum())


def measure(repeats: int = 7) -> dict:
    torch.set_num_threads(1)
    a, b = torch.randn(1, 8), torch.randn(1, 8)
    lin = nn.Linear(8, 8)
    with torch.no_grad():
        add_s = per_call_s(lambda: torch.add(a, b), repeats=repeats)
        f_linear_s = per_call_s(lambda: F.linear(a, lin.weight, lin.bias), repeats=repeats)
        module_s = per_call_s(lambda: lin(a), repeats=repeats) - f_linear_s
    layer_s = _decoder_layer_s(repeats)
    kernels = _layer_kernels()
    return {
        "schema": 1,
        "about": "Eager PyTorch host cost on a CPU build (scripts/measure_host_overhead.py): "
                 "single thread, tiny tensors, min over repeats of the mean per call.",
        "cpu": _cpu_model(), "torch": torch.__version__,
        "transformers": transformers.__version__, "python": platform.python_version(),
        "date": dt.date.today().isoformat(),
        "torch_add_s": add_s, "f_linear_s": f_linear_s, "module_call_s": module_s,
        "decoder_layer": {"hidden": HIDDEN, "heads": HEADS, "intermediate": INTER,
                          "cached_tokens": [CACHED, CACHED + 200], "attention": "sdpa",
                          "new_tokens": 1},
        "decoder_layer_s": layer_s, "perfcast_kernels_per_layer": kernels,
        "cpu_dispatch_per_kernel_s": layer_s / kernels,
        "cuda_launch_s": CUDA_LAUNCH_S,
        "cuda_launch_provenance": "literature: A. Gray, Getting Started with CUDA Graphs, "
                                  "NVIDIA Technical Blog (2019), 3.8 us per launch-bound "
                                  "kernel; not measured (no GPU)",
        "hf_transformers_op_dispatch_s": layer_s / kernels + CUDA_LAUNCH_S,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    result = measure(args.repeats)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for key in ("cpu", "torch", "transformers", "torch_add_s", "f_linear_s", "module_call_s",
                "decoder_layer_s", "perfcast_kernels_per_layer", "cpu_dispatch_per_kernel_s",
                "cuda_launch_s", "hf_transformers_op_dispatch_s"):
        value = result[key]
        print(f"{key:30s} {value * 1e6:.2f} us" if isinstance(value, float)
              else f"{key:30s} {value}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
