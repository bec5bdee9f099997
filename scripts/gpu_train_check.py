"""Training iterations on a real GPU: `perfcast train`'s single-GPU held-out check.

Not a fit: run on a CUDA machine (imports torch, transformers, torchvision and the standard
library only); nothing here is read by perfcast's fitting. Parts:

  memory        the CUDA-visible total and free memory before anything is allocated
  train_llm     catalog LLMs (HF transformers, random weights, SDPA, labels = inputs) trained as
                a user does on one GPU: AMP (fp32 params, bf16 autocast, fused AdamW) or pure
                bf16 (bf16 params and AdamW state), optional full recomputation (HF gradient
                checkpointing); wall seconds per iteration and peak allocated/reserved bytes
  train_resnet  torchvision ResNet-50, SGD with momentum: fp32 with PyTorch's default TF32
                convolutions, strict fp32, bf16 autocast (NCHW and channels_last)
  profile_llm,  torch.profiler over some of those iterations: kernel seconds by kernel name,
  profile_resnet the GPU's busy time against the wall time, the host's enqueue time
  host_train_probe  hidden-64 Llamas of 1 and 5 layers: the host's seconds per eager training
                kernel (the iteration is host-bound), AMP and pure bf16
  train_llm_heldout more models, sequence lengths and batches, timed like train_llm
  train_llm_heldout2 a second such set, measured after the first had informed the model

    python scripts/gpu_train_check.py --out train_check.json [--parts memory,train_llm]
    python scripts/gpu_train_check.py --out /tmp/x.json --tiny     # CPU, small shapes

Priced by scripts/gpu_train_report.py.
"""

from __future__ import annotations

import runpy
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
STACK_CHECK = runpy.run_path(str(ROOT / "scripts/gpu_stack_check.py"))
MODELS = ROOT / "src/perfcast/specs/data/models"
# (model, policy, micro-batch, recompute); seq 2048 each
LLM_CASES = (("qwen2.5-0.5b", "amp", 4, False), ("qwen2.5-0.5b", "pure-bf16", 4, False),
             ("qwen2.5-0.5b", "amp", 8, False), ("llama-3.2-1b", "amp", 1, False),
             ("llama-3.2-1b", "amp", 4, False), ("llama-3.2-1b", "pure-bf16", 4, False),
             ("llama-3.2-1b", "amp", 8, True), ("llama-3.2-3b", "amp", 1, False),
             ("llama-3.2-3b", "pure-bf16", 2, False))
SEQ = 2048
# (precision, batch, channels_last); "fp32" leaves PyTorch's default cudnn.allow_tf32 = True
RESNET_CASES = (("fp32", 128, False), ("fp32-strict", 128, False), ("bf16", 128, False),
                ("bf16", 256, False), ("bf16", 256, True))
WARMUP, ITERS = 3, 8


_sync = STACK_CHECK["_sync"]


def _timed(step, device: str, warmup: int, iters: int) -> dict:
    """Median and min wall seconds of `step` (synchronised each call) and peak memory."""
    for _ in range(warmup):
        step()
    _sync(device)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        step()
        _sync(device)
        times.append(time.perf_counter() - start)
    out = {"iteration_s": statistics.median(times), "min_s": min(times), "iters": iters}
    if device == "cuda":
        out |= {"peak_allocated_bytes": torch.cuda.max_memory_allocated(),
                "peak_reserved_bytes": torch.cuda.max_memory_reserved()}
    return out


def _free(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def memory(device: str, tiny: bool) -> list[dict]:
    if device != "cuda":
        return [{"what": "memory", "skipped": "no GPU"}]
    free, total = torch.cuda.mem_get_info()
    props = torch.cuda.get_device_properties(0)
    return [{"what": "memory", "cuda_free_bytes": free, "cuda_total_bytes": total,
             "props_total_bytes": props.total_memory, "sms": props.multi_processor_count}]


def _llm(name: str, policy: str, device: str, tiny: bool):
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(MODELS / name)
    if tiny:
        config.num_hidden_layers, config.hidden_size, config.intermediate_size = 2, 64, 128
        config.num_attention_heads, config.num_key_value_heads, config.head_dim = 4, 2, 16
        config.vocab_size = 256
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    dtype = torch.float32 if policy == "amp" else torch.bfloat16
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model.train(), config


def _llm_step(name: str, policy: str, batch: int, recompute: bool, device: str, tiny: bool,
              seq: int = SEQ):
    """One training iteration of a catalog LLM as a closure, and the row describing it."""
    model, config = _llm(name, policy, device, tiny)
    if recompute:
        model.gradient_checkpointing_enable()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=device == "cuda")
    seq = 32 if tiny else seq
    ids = torch.randint(0, config.vocab_size, (batch, seq), device=device)

    def step() -> None:
        with torch.autocast(device, dtype=torch.bfloat16, enabled=policy == "amp"):
            loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    row = {"model": name, "policy": policy, "micro_batch": batch, "seq_len": seq,
           "recompute": "full" if recompute else "none",
           "params": sum(p.numel() for p in model.parameters()),
           "optimizer": "AdamW(fused)" if device == "cuda" else "AdamW"}
    return step, row


def _llm_case(name: str, policy: str, batch: int, recompute: bool, device: str,
              tiny: bool, seq: int = SEQ) -> dict:
    row = {"what": "train_llm"}
    try:
        step, about = _llm_step(name, policy, batch, recompute, device, tiny, seq)
        row |= about | _timed(step, device, 1 if tiny else WARMUP, 2 if tiny else ITERS)
    except torch.cuda.OutOfMemoryError as exc:
        row |= {"model": name, "policy": policy, "micro_batch": batch, "oom": True,
                "error": str(exc).splitlines()[0][:300]}
    return row


def train_llm(device: str, tiny: bool) -> list[dict]:
    import transformers

    rows = []
    for case in LLM_CASES[:2] if tiny else LLM_CASES:
        rows.append(_llm_case(*case, device, tiny) | {"transformers": transformers.__version__})
        _free(device)
        print(f"  {case}: {rows[-1].get('iteration_s', rows[-1].get('error'))}",
              file=sys.stderr, flush=True)
    return rows


def _resnet_step(precision: str, batch: int, channels_last: bool, device: str, tiny: bool):
    """One ResNet-50 training iteration as a closure (sets cudnn.allow_tf32 for it)."""
    import torchvision

    torch.backends.cudnn.allow_tf32 = precision != "fp32-strict"
    torch.manual_seed(0)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = torchvision.models.resnet50().to(device, memory_format=fmt).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    side = 32 if tiny else 224
    images = torch.randn(batch, 3, side, side, device=device).to(memory_format=fmt)
    labels = torch.randint(0, 1000, (batch,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        with torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = loss_fn(model(images), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    row = {"model": "resnet50", "precision": precision, "micro_batch": batch,
           "channels_last": channels_last,
           "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
           "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
           "cudnn_benchmark": torch.backends.cudnn.benchmark,
           "torchvision": torchvision.__version__}
    return step, row


def _resnet_case(precision: str, batch: int, channels_last: bool, device: str,
                 tiny: bool) -> dict:
    step, about = _resnet_step(precision, batch, channels_last, device, tiny)
    row = {"what": "train_resnet"} | about
    row |= _timed(step, device, 1 if tiny else 5, 2 if tiny else 10)
    row["images_per_s"] = batch / row["iteration_s"]
    torch.backends.cudnn.allow_tf32 = True
    return row


def train_resnet(device: str, tiny: bool) -> list[dict]:
    rows = []
    for precision, batch, cl in RESNET_CASES:
        rows.append(_resnet_case(precision, 2 if tiny else batch, cl, device, tiny))
        _free(device)
        print(f"  resnet50 {precision} {batch} cl={cl}: {rows[-1]['iteration_s']:.4f} s",
              file=sys.stderr, flush=True)
    return rows


PROFILE_LLM = (("qwen2.5-0.5b", "amp", 4, False), ("llama-3.2-1b", "amp", 1, False),
               ("llama-3.2-1b", "amp", 4, False), ("llama-3.2-1b", "pure-bf16", 4, False),
               ("llama-3.2-3b", "amp", 1, False))
PROFILE_RESNET = (("fp32", 128, False), ("bf16", 128, False))


def _union_s(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of (start_us, end_us) spans."""
    total, end = 0.0, float("-inf")
    for lo, hi in sorted(spans):
        if hi > end:
            total += hi - max(lo, end)
            end = hi
    return total / 1e6


def _profiled(step, device: str, iters: int = 2) -> dict:
    """Kernel time by kernel name (torch.profiler), the GPU's busy union against the wall
    span of `iters` synchronised iterations, and the host's enqueue time per iteration."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        step()
    _sync(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    enqueue = []
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        for _ in range(iters):
            t0 = time.perf_counter()
            step()
            enqueue.append(time.perf_counter() - t0)
            _sync(device)
        wall = (time.perf_counter() - start) / iters
    kernels = [e for e in prof.events()  # on the CPU (--tiny), its ops stand in for kernels
               if device != "cuda" or e.device_type != torch.autograd.DeviceType.CPU]
    spans = [(e.time_range.start, e.time_range.end) for e in kernels]
    by_name: dict[str, list[float]] = {}
    for e in kernels:
        acc = by_name.setdefault(e.name, [0.0, 0])
        acc[0] += e.time_range.elapsed_us() / 1e6 / iters
        acc[1] += 1 / iters
    top = sorted(by_name.items(), key=lambda kv: -kv[1][0])
    return {"wall_s": wall, "enqueue_s": statistics.median(enqueue),
            "kernel_sum_s": sum(v[0] for v in by_name.values()),
            "gpu_busy_s": _union_s(spans) / iters,
            "gpu_span_s": ((max(b for _, b in spans) - min(a for a, _ in spans)) / 1e6 / iters
                           if spans else 0.0),
            "kernels_per_iteration": sum(v[1] for v in by_name.values()),
            "kernels": [{"name": name[:160], "s": v[0], "count": v[1]} for name, v in top[:80]]}


def profile_llm(device: str, tiny: bool) -> list[dict]:
    """Where each LLM iteration's time goes on the GPU: kernel seconds by name, idle gaps."""
    rows = []
    for case in PROFILE_LLM[:1] if tiny else PROFILE_LLM:
        step, about = _llm_step(*case, device, tiny)
        rows.append({"what": "profile_llm"} | about | _profiled(step, device))
        del step
        _free(device)
        print(f"  profiled {case}", file=sys.stderr, flush=True)
    return rows


def profile_resnet(device: str, tiny: bool) -> list[dict]:
    """The same for ResNet-50 (which convolution kernels fp32 runs: TF32 or not)."""
    rows = []
    for precision, batch, cl in PROFILE_RESNET:
        step, about = _resnet_step(precision, 2 if tiny else batch, cl, device, tiny)
        rows.append({"what": "profile_resnet"} | about | _profiled(step, device))
        torch.backends.cudnn.allow_tf32 = True
        del step
        _free(device)
    return rows


# Cases no fit or modelling choice has seen (held out until after the changes they check)
HELDOUT_CASES = (("smollm2-1.7b", "amp", 2, False, 2048), ("qwen2.5-1.5b", "amp", 4, False, 1024),
                 ("qwen2.5-1.5b", "pure-bf16", 4, False, 1024),
                 ("llama-3.2-1b", "amp", 1, False, 4096), ("qwen3-0.6b", "amp", 8, False, 1024),
                 ("llama-3.2-3b", "amp", 2, True, 2048), ("smollm2-1.7b", "amp", 1, False, 512))
# A second held-out set, measured after every modelling choice the first one informed
HELDOUT2_CASES = (("qwen2.5-3b", "amp", 1, False, 2048),
                  ("llama-3.2-1b", "pure-bf16", 8, False, 1024),
                  ("qwen3-4b", "pure-bf16", 2, False, 1024),
                  ("smollm2-1.7b", "amp", 4, True, 1024),
                  ("deepseek-coder-1.3b", "amp", 2, False, 2048),
                  ("qwen2.5-0.5b", "amp", 16, False, 512),
                  ("qwen3-0.6b", "pure-bf16", 4, False, 2048))
PROBE_LAYERS = (1, 5)


def train_llm_heldout(device: str, tiny: bool, cases=HELDOUT_CASES,
                      tag: object = True) -> list[dict]:
    """More catalog LLMs, sequence lengths and batches, timed like train_llm."""
    rows = []
    for name, policy, batch, recompute, seq in cases[:1] if tiny else cases:
        rows.append(_llm_case(name, policy, batch, recompute, device, tiny, seq)
                    | {"heldout": tag})
        _free(device)
        print(f"  {name} {policy} mb{batch} seq{seq}: {rows[-1].get('iteration_s')}",
              file=sys.stderr, flush=True)
    return rows


def train_llm_heldout2(device: str, tiny: bool) -> list[dict]:
    """The second held-out set (HELDOUT2_CASES), timed like train_llm."""
    return train_llm_heldout(device, tiny, HELDOUT2_CASES, 2)


def host_train_probe(device: str, tiny: bool) -> list[dict]:
    """Host cost of an eager training iteration: hidden-64 Llama models of 1 and 5 layers
    (GPU work negligible, so the iteration is host-bound) under AMP and pure bf16, wall
    seconds per iteration and kernels per iteration (torch.profiler)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    rows = []
    for policy in ("amp", "pure-bf16"):
        for layers in PROBE_LAYERS:
            config = LlamaConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                 num_key_value_heads=2, head_dim=16, num_hidden_layers=layers,
                                 vocab_size=256, max_position_embeddings=512)
            config._attn_implementation = "sdpa"
            torch.manual_seed(0)
            dtype = torch.float32 if policy == "amp" else torch.bfloat16
            with torch.device(device):
                model = LlamaForCausalLM(config).to(dtype).train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=device == "cuda")
            ids = torch.randint(0, 256, (1, 16), device=device)

            def step(model=model, opt=opt, ids=ids, policy=policy) -> None:
                with torch.autocast(device, dtype=torch.bfloat16, enabled=policy == "amp"):
                    loss = model(input_ids=ids, labels=ids, use_cache=False).loss
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)

            timed = _timed(step, device, 5, 5 if tiny else 40)
            prof = _profiled(step, device, iters=2)
            rows.append({"what": "host_train_probe", "policy": policy, "layers": layers,
                         "iteration_s": timed["iteration_s"], "min_s": timed["min_s"],
                         "kernels_per_iteration": prof["kernels_per_iteration"],
                         "gpu_busy_s": prof["gpu_busy_s"], "enqueue_s": prof["enqueue_s"]})
            del model, opt
            _free(device)
    return rows


PARTS = {fn.__name__: fn for fn in (memory, train_llm, train_resnet, profile_llm,
                                    profile_resnet, host_train_probe, train_llm_heldout,
                                    train_llm_heldout2)}


def main() -> None:
    STACK_CHECK["check_main"](__doc__, PARTS,
                              {"timing": "host wall per synchronised iteration"})


if __name__ == "__main__":
    main()
