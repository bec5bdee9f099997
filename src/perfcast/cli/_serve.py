"""`perfcast serve`: a serving deployment under load, simulated request by request."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from perfcast import __version__
from perfcast.api._choices import precision_spec as _precision
from perfcast.cli._common import JsonOption, emit_json, guarded
from perfcast.errors import InputError
from perfcast.serve import (
    ServeConfig,
    make_workload,
    simulate,
    simulate_colocated,
    simulate_disaggregated,
)
from perfcast.serve._config import DEFAULT_EXPERT_SKEW

console = Console()


def _pair(text: str | None, field: str) -> int | tuple[float | int, ...] | None:
    """'512' -> 512; '128,2048' -> (128, 2048) for uniform/zipf lengths."""
    if text is None:
        return None
    try:
        parts = [float(p) for p in text.split(",")]
    except ValueError:
        raise InputError(field, f"not a number or pair: {text!r}", "N or LO,HI") from None
    if len(parts) == 1 and parts[0].is_integer():
        return int(parts[0])
    if len(parts) == 2:  # integers stay integers (uniform bounds, zipf's max)
        return tuple(int(p) if p.is_integer() else p for p in parts)
    raise InputError(field, f"not a number or pair: {text!r}", "N or LO,HI")


def _outputs(out: Path | None, trace_out: Path | None) -> None:
    for field, path in (("out", out), ("trace_out", trace_out)):
        if path is not None and path.exists():
            raise InputError(field, f"{path} exists; perfcast never overwrites a file",
                             "a new path")
    if out is not None and out.suffix not in (".csv", ".parquet"):
        raise InputError("out", f"unknown format {out.suffix!r}", [".csv", ".parquet"])


@guarded
def serve(
    model: Annotated[str, typer.Option(help="Catalog model name or HF id.")] = "llama-2-7b",
    gpu: Annotated[str | None, typer.Option(help="Catalog GPU name.")] = None,
    cluster: Annotated[str | None, typer.Option(help="Cluster preset instead of --gpu.")] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree per replica.")] = 1,
    pp: Annotated[int, typer.Option(help="Pipeline stages per replica.")] = 1,
    replicas: Annotated[int, typer.Option(help="Replicas behind the router.")] = 1,
    scheduler: Annotated[str, typer.Option(
        help="vllm-v0, vllm-v1, sarathi, orca or static.")] = "vllm-v0",
    router: Annotated[str, typer.Option(
        help="round-robin, least-outstanding or least-kv.")] = "round-robin",
    qps: Annotated[float | None, typer.Option(help="Mean arrival rate (open loop).")] = None,
    concurrency: Annotated[int | None, typer.Option(
        help="Requests kept in flight (closed loop, like benchmark clients).")] = None,
    arrival: Annotated[str | None, typer.Option(
        help="poisson, gamma, trace or closed_loop (default from --qps/--concurrency).")] = None,
    cv: Annotated[float | None, typer.Option(help="Gamma arrivals' coefficient of variation.")
                  ] = None,
    num_requests: Annotated[int, typer.Option(help="Requests to simulate.")] = 200,
    lengths: Annotated[str, typer.Option(
        help="fixed, uniform, zipf, trace or csv (request lengths).")] = "fixed",
    prompt_tokens: Annotated[str | None, typer.Option(
        help="Prompt tokens: N (fixed), LO,HI (uniform) or A,MAX (zipf).")] = None,
    output_tokens: Annotated[str | None, typer.Option(help="Output tokens, as --prompt-tokens.")
                             ] = None,
    trace: Annotated[str | None, typer.Option(
        help="Shipped trace: arxiv, splitwise-conv or splitwise-code.")] = None,
    csv: Annotated[Path | None, typer.Option(help="Your own request CSV (prompt_tokens, "
                                             "output_tokens[, arrival_s]).")] = None,
    max_batch: Annotated[int, typer.Option(help="Max sequences per step.")] = 256,
    max_batch_tokens: Annotated[int | None, typer.Option(help="Token budget per step.")] = None,
    chunk_size: Annotated[int | None, typer.Option(help="Prefill chunk (sarathi/vllm-v1).")
                          ] = None,
    block_size: Annotated[int, typer.Option(help="KV-cache tokens per block.")] = 16,
    preemption: Annotated[str, typer.Option(help="recompute or swap.")] = "recompute",
    gpu_memory_utilization: Annotated[float, typer.Option(help="Share of GPU memory used.")
                                      ] = 0.9,
    dtype: Annotated[str, typer.Option(help="Activation (and default weight) dtype.")] = "bf16",
    weight_dtype: Annotated[str | None, typer.Option(help="Weights, e.g. int4.")] = None,
    kv_dtype: Annotated[str | None, typer.Option(help="KV-cache dtype.")] = None,
    activation_quant: Annotated[str, typer.Option(
        help="fp8/fp4 activations: 'fused' (quantised by the producing norm/activation "
             "kernel, as serving engines do) or 'separate' (own kernels per GEMM).")
                                ] = "fused",
    allreduce: Annotated[str, typer.Option(
        help="TP all-reduce: custom (engines' one-shot kernel where faster) or nccl.")
                         ] = "custom",
    host_overlap: Annotated[bool, typer.Option(
        help="The engine schedules on the CPU while the GPU runs (SGLang/TRT-LLM overlap "
             "scheduler, vLLM async scheduling).")] = False,
    prefix_cache: Annotated[bool, typer.Option(
        help="Automatic prefix caching: reuse cached KV blocks of shared prompt content.")
                            ] = False,
    system_prompt_tokens: Annotated[int | None, typer.Option(
        help="Prepend a shared system prompt of this many tokens to every prompt.")] = None,
    prompt_groups: Annotated[int, typer.Option(
        help="Distinct system prompts (each request gets one at random).")] = 1,
    turns: Annotated[int | None, typer.Option(
        help="Chats of this many turns: each turn's prompt is the conversation so far plus "
             "a new message drawn from --prompt-tokens; --qps is then chats per second.")
                     ] = None,
    think_s: Annotated[float, typer.Option(
        help="Seconds a user takes to send the next turn after seeing the answer.")] = 0.0,
    spec_k: Annotated[int, typer.Option(
        help="Speculative decoding: draft tokens proposed per step (0: off).")] = 0,
    spec_draft_model: Annotated[str | None, typer.Option(
        help="Draft model (catalog name); omitted: draft-free (n-gram/self-speculation).")
                                ] = None,
    spec_acceptance: Annotated[str, typer.Option(
        help="Per-token acceptance rate, or one per draft position (A1,A2,...).")] = "0.7",
    spec_draft_gpu: Annotated[str, typer.Option(
        help="shared (draft on the target's GPUs) or separate.")] = "shared",
    disagg_prefill: Annotated[str | None, typer.Option(
        help="Disaggregated serving: the prefill pool as REPLICASxTP (e.g. 2x4); needs "
             "--disagg-decode.")] = None,
    disagg_decode: Annotated[str | None, typer.Option(
        help="The decode pool as REPLICASxTP (same model, GPU and scheduler).")] = None,
    colocate: Annotated[list[str] | None, typer.Option(
        help="Serve these models too, on the same GPUs, each with its own stream drawn like "
             "the first (seeds seed+1, ...); memory split evenly.")] = None,
    colocate_sharing: Annotated[str, typer.Option(
        help="time-slice (one model's step at a time) or mps (fixed equal partitions).")
                                ] = "time-slice",
    ttft_slo: Annotated[float | None, typer.Option(help="TTFT SLO (s) for goodput.")] = None,
    tpot_slo: Annotated[float | None, typer.Option(help="TPOT SLO (s) for goodput.")] = None,
    seed: Annotated[int, typer.Option(help="Workload seed.")] = 0,
    out: Annotated[Path | None, typer.Option(help="Per-request table (.csv or .parquet).")
                   ] = None,
    trace_out: Annotated[Path | None, typer.Option(help="Perfetto/Chrome-trace JSON file.")
                         ] = None,
    json_out: JsonOption = False,
    ep: Annotated[int, typer.Option(help="Expert-parallel degree of MoE layers (must divide "
                                    "tp x attention-dp).")] = 1,
    attention_dp: Annotated[int, typer.Option(
        help="Attention data-parallel ranks sharing one EP group (DeepSeek-style); each is a "
             "replica, so --replicas must be a multiple.")] = 1,
    expert_skew: Annotated[float, typer.Option(
        help="Most loaded EP rank's routed tokens / the mean (1 = balanced).")
                           ] = DEFAULT_EXPERT_SKEW,
) -> None:
    """TTFT, TPOT, E2E (mean/P50/P90/P99), throughput, goodput, preemptions and KV use."""
    _outputs(out, trace_out)
    if arrival is None:
        arrival = "closed_loop" if concurrency is not None else "poisson"
    if (ttft_slo is None) != (tpot_slo is None):
        raise InputError("ttft_slo", "give both --ttft-slo and --tpot-slo for goodput",
                         "both or neither")
    gpu_name = gpu if gpu or cluster else "a100-sxm4-80gb"
    config = ServeConfig(
        model=model, gpu=gpu_name, cluster=cluster, tp=tp, pp=pp, replicas=replicas,
        scheduler=scheduler, router=router, max_batch=max_batch,
        max_batch_tokens=max_batch_tokens, chunk_size=chunk_size, block_size=block_size,
        preemption=preemption, gpu_memory_utilization=gpu_memory_utilization,
        host_overlap=host_overlap, allreduce=allreduce, prefix_caching=prefix_cache,
        spec_k=spec_k, spec_draft_model=spec_draft_model, spec_draft_gpu=spec_draft_gpu,
        spec_acceptance=_rates(spec_acceptance), ep=ep, attention_dp=attention_dp,
        expert_skew=expert_skew,
        precision=_precision(dtype, kv_dtype, weight_dtype, activation_quant))
    defaults = {"fixed": (512, 128)}.get(lengths, (None, None))

    def make(seed: int):
        return make_workload(
            num_requests, arrival=arrival, qps=qps, cv=cv, concurrency=concurrency,
            lengths=lengths, prompt_tokens=_pair(prompt_tokens, "prompt_tokens") or defaults[0],
            output_tokens=_pair(output_tokens, "output_tokens") or defaults[1], trace=trace,
            csv=csv, system_prompt_tokens=system_prompt_tokens, prompt_groups=prompt_groups,
            turns=turns, think_s=think_s, seed=seed)

    workload = make(seed)
    if colocate:
        summary = _colocated(config, colocate, colocate_sharing, make, seed,
                             (ttft_slo, tpot_slo))
        emit_json({"perfcast_version": __version__, **summary}) if json_out else \
            console.print_json(json.dumps(summary))
        return
    if disagg_prefill is not None or disagg_decode is not None:
        summary = _disaggregated(config, workload, disagg_prefill, disagg_decode, seed,
                                 (ttft_slo, tpot_slo), out, trace_out)
        emit_json({"perfcast_version": __version__, **summary}) if json_out else \
            console.print_json(json.dumps(summary))
        return
    result = simulate(config, workload, seed=seed, timeline=trace_out is not None)
    summary = result.summary(ttft_slo, tpot_slo) | _kv_capacity(result, config.block_size)
    if out is not None:
        (result.to_csv if out.suffix == ".csv" else result.to_parquet)(out)
    if trace_out is not None:
        trace_out.write_text(json.dumps(result.chrome_trace()))
    inputs = {"model": config.model if isinstance(config.model, str) else config.model.name,
              "gpu": gpu_name, "cluster": cluster, "tp": tp, "pp": pp, "replicas": replicas,
              "scheduler": scheduler, "router": router, "arrival": arrival, "qps": qps,
              "concurrency": concurrency, "num_requests": num_requests, "lengths": lengths,
              "seed": seed, "prefix_cache": prefix_cache,
              "system_prompt_tokens": system_prompt_tokens, "turns": turns,
              "ep": ep, "attention_dp": attention_dp, "expert_skew": expert_skew}
    if json_out:
        emit_json({"perfcast_version": __version__, "inputs": inputs, **summary})
    else:
        _print(summary, inputs)


def _kv_capacity(result, block_size: int) -> dict:
    """KV capacity in tokens per replica, and how many sequences of this workload's mean
    length (prompt + output) fit in it at once (vLLM logs the same "maximum concurrency")."""
    r = result.requests
    mean_tokens = float((r["prompt_tokens"] + r["output_tokens"]).mean())
    blocks_per_seq = max(1, math.ceil(mean_tokens / block_size))
    return {"kv_capacity_tokens": result.kv_blocks * block_size,
            "max_concurrent_seqs": result.kv_blocks // blocks_per_seq}


def _colocated(config: ServeConfig, others: list[str], sharing: str, make, seed: int,
               slos: tuple) -> dict:
    """The first model and `others` on the same GPUs, each beside its dedicated run."""
    configs = [config] + [ServeConfig(**(config.model_dump() | {"model": m})) for m in others]
    loads = [make(seed + i) for i in range(len(configs))]
    results = simulate_colocated(configs, loads, sharing=sharing, seed=seed)
    models = []
    for c, w, r in zip(configs, loads, results, strict=True):
        alone = simulate(c, w, seed=seed).summary(*slos)
        models.append({"model": c.model_spec.name, **r.summary(*slos),
                       "dedicated": {k: alone[k] for k in ("ttft_s", "tpot_s", "e2e_s",
                                                           "throughput_req_s", "kv_blocks")}})
    return {"inputs": {"sharing": sharing, "models": [m["model"] for m in models]},
            "models": models}


def _pool(text: str | None, field: str) -> tuple[int, int]:
    """'2x4' -> (replicas 2, tp 4)."""
    parts = (text or "").lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() and int(p) >= 1 for p in parts):
        raise InputError(field, f"expected REPLICASxTP such as 2x4, got {text!r}", "e.g. 2x4")
    return int(parts[0]), int(parts[1])


def _disaggregated(config: ServeConfig, workload, prefill: str | None, decode: str | None,
                   seed: int, slos: tuple, out: Path | None, trace_out: Path | None) -> dict:
    """Prefill and decode pools built from `config` (model, GPU, scheduler, ...)."""
    if trace_out is not None:
        raise InputError("trace_out", "is not available for disaggregated runs yet", "omit it")
    pools = []
    for text, field in ((prefill, "disagg_prefill"), (decode, "disagg_decode")):
        replicas, tp = _pool(text, field)
        pools.append(ServeConfig(**(config.model_dump() | {"replicas": replicas, "tp": tp})))
    result = simulate_disaggregated(pools[0], pools[1], workload, seed=seed)
    if out is not None:
        write = result.requests.to_csv if out.suffix == ".csv" else result.requests.to_parquet
        write(out, index=False)
    return {"inputs": {"disagg_prefill": prefill, "disagg_decode": decode, "seed": seed},
            **result.summary(*slos)}


def _rates(text: str) -> float | tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise InputError("spec_acceptance", f"not a rate or comma-separated rates: {text!r}",
                         "e.g. 0.7 or 0.9,0.8,0.6") from None
    return values[0] if len(values) == 1 else values


def _print(s: dict, inputs: dict) -> None:
    t = Table(title=f"{inputs['model']}: {inputs['replicas']} x (TP{inputs['tp']} PP"
              f"{inputs['pp']}) {inputs['gpu'] or inputs['cluster']}, {inputs['scheduler']}, "
              f"{s['num_requests']} requests")
    for col in ("metric", "mean", "p50", "p90", "p99"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queueing_s"):
        st = s[key]
        t.add_row(key.removesuffix("_s").upper() + " (ms)",
                  *(f"{st[q] * 1e3:.1f}" for q in ("mean", "p50", "p90", "p99")))
    console.print(t)
    lines = [f"throughput {s['throughput_req_s']:.2f} req/s, {s['throughput_tok_s']:.0f} tok/s",
             f"preemptions {s['preemptions']}, restarts {s['restarts']}",
             f"KV blocks {s['kv_blocks']}, utilisation mean {s['kv_utilisation_mean']:.1%}, "
             f"fragmentation {s['kv_fragmentation_mean']:.1%}"]
    if "goodput_req_s" in s:
        lines.append(f"goodput {s['goodput_req_s']:.2f} req/s under the SLOs")
    if "spec_tokens_per_step" in s:
        lines.append(f"speculative decoding: {s['spec_tokens_per_step']:.2f} tokens per step "
                     f"(expected {s['spec_expected_tokens_per_step']:.2f})")
    if "prefix_hit_ratio" in s:
        lines.append(f"prefix cache hit ratio {s['prefix_hit_ratio']:.1%} of prompt tokens")
    console.print("\n".join(lines))
