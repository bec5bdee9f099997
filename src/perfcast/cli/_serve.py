"""`perfcast serve`: a serving deployment under load, simulated request by request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from perfcast.api import ServeRequest, ServeResult, run
from perfcast.cli._common import JsonOption, cli_options, emit, guarded
from perfcast.serve._config import DEFAULT_EXPERT_SKEW

console = Console()


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
    emit(run(ServeRequest.from_options(cli_options(locals()))), json_out, _print)


def _print(result: ServeResult) -> None:
    """Co-located and disaggregated runs as their JSON summary; one deployment as tables."""
    if result.mode != "single":
        console.print_json(json.dumps({"inputs": result.inputs, **result.metrics}))
        return
    _print_tables(result.metrics, result.inputs)


def _print_tables(s: dict, inputs: dict) -> None:
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
