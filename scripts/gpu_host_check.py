"""Host cost and whole HF steps on a real GPU: the hf-transformers stack's held-out check.

Not a fit of perfcast's kernels: run on a CUDA machine (imports torch, transformers and the
standard library only). Parts:

  host_cuda / host_cpu  perfcast.measure._host_probe on the GPU and on this host's CPU (the
                        host profile of the hf-transformers stack, and the CPU-only numbers that
                        give any other host's speed relative to this one)
  hf_steps              catalog models (random weights, bf16, SDPA) as a user runs them:
                        prefill forward (last-token logits) and generate()'s seconds per new
                        token; whole-step wall times, never fitted
  hf_vectors            transformers' own Llama modules around the GEMMs (RMSNorm, rotary,
                        SiLU-and-mul, residual add), GPU time per call by CUDA-graph replay

    python scripts/gpu_host_check.py --out host_check.json [--parts host_cuda,hf_steps]
    python scripts/gpu_host_check.py --out /tmp/x.json --tiny     # CPU, small shapes
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
PROBE = runpy.run_path(str(ROOT / "src/perfcast/measure/_host_probe.py"))
STACK_CHECK = runpy.run_path(str(ROOT / "scripts/gpu_stack_check.py"))
MODELS = ROOT / "src/perfcast/specs/data/models"
STEP_MODELS = ("qwen2.5-0.5b", "llama-3.2-1b", "llama-2-7b")
PREFILL_SEQ = (128, 512, 2048)
GENERATE = ((1, 512), (8, 512), (1, 2048))  # (batch, prompt tokens)
NEW_SHORT, NEW_LONG = 16, 48
VECTOR_TOKENS = (1, 512, 2048, 8192)


per_call_s = PROBE["per_call_s"]


def host_cuda(device: str, tiny: bool) -> list[dict]:
    return [{"what": "host_probe", **PROBE["host_probe"](device, 2 if tiny else 5)}]


def host_cpu(device: str, tiny: bool) -> list[dict]:
    return [{"what": "host_probe", **PROBE["host_probe"]("cpu", 2 if tiny else 5)}]


def _hf_model(name: str, device: str, tiny: bool):
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(MODELS / name)
    if tiny:
        config.num_hidden_layers, config.hidden_size, config.intermediate_size = 2, 64, 128
        config.num_attention_heads, config.num_key_value_heads, config.head_dim = 4, 2, 16
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    return model.eval(), config


def hf_steps(device: str, tiny: bool) -> list[dict]:
    import transformers

    rows = []
    for name in STEP_MODELS[:1] if tiny else STEP_MODELS:
        model, config = _hf_model(name, device, tiny)
        vocab = config.vocab_size
        for seq in (16,) if tiny else PREFILL_SEQ:
            ids = torch.randint(0, vocab, (1, seq), device=device)
            with torch.inference_mode():
                s = per_call_s(lambda ids=ids, model=model: model(ids, use_cache=False,
                                                                  logits_to_keep=1),
                               device, calls=3 if tiny else 10, repeats=3)
            rows.append({"what": "prefill", "model": name, "batch": 1, "seq": seq,
                         "wall_s": s, "logits": "last"})
        for batch, prompt in ((1, 16),) if tiny else GENERATE:
            ids = torch.randint(0, vocab - 2, (batch, prompt), device=device)

            def run(new: int, ids=ids, model=model) -> float:
                return PROBE["generate_wall_s"](model, ids, new, device, pad_token_id=0)

            run(4)
            short = min(run(NEW_SHORT) for _ in range(2))
            long = min(run(NEW_LONG) for _ in range(2))
            rows.append({"what": "generate_token", "model": name, "batch": batch,
                         "context": prompt, "wall_s": (long - short) / (NEW_LONG - NEW_SHORT),
                         "t_short_s": short, "t_long_s": long,
                         "new_tokens": [NEW_SHORT, NEW_LONG]})
        rows[-1]["transformers"] = transformers.__version__
        model = None
        if device == "cuda":
            torch.cuda.empty_cache()
        print(f"  {name} done", file=sys.stderr, flush=True)
    return rows


def _gpu_s(fn, device: str, calls: int = 20) -> float:
    """GPU seconds per call: `calls` calls captured in one CUDA graph, replayed (CPU: wall)."""
    if device != "cuda":
        return per_call_s(fn, device, calls=calls, repeats=3)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(5):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return begin.elapsed_time(end) / 1e3 / (5 * calls)


def hf_vectors(device: str, tiny: bool) -> list[dict]:
    """transformers' Llama-2-7B modules between the GEMMs, per call, bf16."""
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama as ml

    hidden, inter, heads = (64, 128, 4) if tiny else (4096, 11008, 32)
    cfg = LlamaConfig(hidden_size=hidden, intermediate_size=inter, num_attention_heads=heads,
                      num_key_value_heads=heads)
    norm = ml.LlamaRMSNorm(hidden, eps=1e-5).to(device, torch.bfloat16)
    rope = ml.LlamaRotaryEmbedding(cfg).to(device)
    act = ml.ACT2FN["silu"]
    rows = []
    for tokens in (1, 8) if tiny else VECTOR_TOKENS:
        x = torch.randn(1, tokens, hidden, device=device, dtype=torch.bfloat16)
        gate = torch.randn(1, tokens, inter, device=device, dtype=torch.bfloat16)
        up = torch.randn_like(gate)
        q = torch.randn(1, heads, tokens, hidden // heads, device=device, dtype=torch.bfloat16)
        k = torch.randn_like(q)
        pos = torch.arange(tokens, device=device)[None]
        cos, sin = rope(x, pos)
        cases = {"rms_norm": lambda x=x: norm(x),
                 "rotary_qk": lambda q=q, k=k, c=cos, s=sin: ml.apply_rotary_pos_emb(q, k, c, s),
                 "silu_mul": lambda g=gate, u=up: act(g) * u,
                 "residual_add": lambda x=x: x + x}
        with torch.inference_mode():
            for name, fn in cases.items():
                rows.append({"what": "vector_module", "module": name, "tokens": tokens,
                             "hidden": hidden, "intermediate": inter, "heads": heads,
                             "dtype": "bf16", "gpu_s": _gpu_s(fn, device)})
    return rows


PARTS = {fn.__name__: fn for fn in (host_cuda, host_cpu, hf_steps, hf_vectors)}


def main() -> None:
    STACK_CHECK["check_main"](
        __doc__, PARTS, {"cpu": PROBE["cpu_model"]()},
        lambda row: {k: v for k, v in row.items() if k not in ("about", "model_")})


if __name__ == "__main__":
    main()
