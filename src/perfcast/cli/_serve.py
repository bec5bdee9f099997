"""`perfcast serve`: a serving deployment under load, simulated request by request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from perfcast.api import ServeRequest, ServeResult
from perfcast.cli._common import (
    FormatOption,
    HostSpeedOption,
    JsonOption,
    StackOption,
    answer,
    guarded,
)
from perfcast.cli._console import Advanced, Table, in_panel, new_console, stack_summary
from perfcast.serve._config import DEFAULT_EXPERT_SKEW

# Help panels: the deployment's options first (typer's "Options"), then these; the advanced
# ones (MoE and precision, engine internals, arrival shapes, chats, ...) wait for --help-all.
ENGINE, WORKLOAD, REQUESTS, SLOS, OUTPUT = "Engine", "Workload", "Requests", "SLOs", "Output"
MOE, INTERNALS, ARRIVALS, CHATS = (Advanced.MOE_PRECISION, Advanced.ENGINE_INTERNALS,
                                   Advanced.ARRIVALS, Advanced.CHATS)
SPEC, DISAGG, COLOCATE = Advanced.SPECULATIVE, Advanced.DISAGGREGATION, Advanced.COLOCATION
Json = in_panel(JsonOption, OUTPUT)
Format = in_panel(FormatOption, OUTPUT)


# Serving's own --kernel-model: its choices (the roofline is refused) on one line, since
# serve's `--help` is at its 60-line budget.
KernelModel = Annotated[str, typer.Option(
    "--kernel-model", help="calibrated (default) or learned kernels.", show_default=False,
    rich_help_panel=ENGINE)]


@guarded
def serve(
    model: Annotated[str, typer.Option(help="Catalog model or HF id.")] = "llama-2-7b",
    gpu: Annotated[str | None, typer.Option(help="Catalog GPU name.")] = None,
    cluster: Annotated[str | None, typer.Option(help="Cluster preset instead of --gpu.")] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree per replica.")] = 1,
    pp: Annotated[int, typer.Option(help="Pipeline stages per replica.")] = 1,
    replicas: Annotated[int, typer.Option(help="Replicas behind the router.")] = 1,
    dtype: Annotated[str, typer.Option(help="Activation (and weight) dtype.")] = "bf16",
    scheduler: Annotated[str | None, typer.Option(
        help="Batch scheduler (default: the stack's).", rich_help_panel=ENGINE)] = None,
    max_batch: Annotated[int | None, typer.Option(
        help="Max sequences per step.", rich_help_panel=ENGINE)] = None,
    max_batch_tokens: Annotated[int | None, typer.Option(
        help="Token budget per step.", rich_help_panel=ENGINE)] = None,
    chunk_size: Annotated[int | None, typer.Option(
        help="Prefill chunk (chunking schedulers).", rich_help_panel=ENGINE)] = None,
    qps: Annotated[float | None, typer.Option(
        "--qps", "--request-rate", rich_help_panel=WORKLOAD,
        help="Mean arrival rate, req/s: open loop (vLLM's --request-rate).")] = None,
    concurrency: Annotated[int | None, typer.Option(
        "--concurrency", "--max-concurrency", rich_help_panel=WORKLOAD,
        help="Requests in flight, a closed loop: vLLM's --max-concurrency at its default "
             "--request-rate inf. A rate capped by a concurrency is not modelled.")] = None,
    num_requests: Annotated[int, typer.Option(
        "--num-requests", "--num-prompts", rich_help_panel=WORKLOAD,
        help="Requests to simulate (vLLM's --num-prompts).")] = 200,
    seed: Annotated[int, typer.Option(help="Workload seed.", rich_help_panel=WORKLOAD)] = 0,
    lengths: Annotated[str, typer.Option(
        help="fixed, uniform, zipf, trace or csv.", rich_help_panel=REQUESTS)] = "fixed",
    prompt_tokens: Annotated[str | None, typer.Option(
        help="N (fixed), LO,HI (uniform) or A,MAX (zipf).", rich_help_panel=REQUESTS)] = None,
    output_tokens: Annotated[str | None, typer.Option(
        help="As --prompt-tokens.", rich_help_panel=REQUESTS)] = None,
    trace: Annotated[str | None, typer.Option(
        help="arxiv, splitwise-conv or splitwise-code.", rich_help_panel=REQUESTS)] = None,
    csv: Annotated[Path | None, typer.Option(
        help="CSV: prompt_tokens,output_tokens[,arrival_s].", rich_help_panel=REQUESTS)
                   ] = None,
    ttft_slo: Annotated[str | None, typer.Option(
        help="TTFT SLO for goodput: 500ms, 0.5s (bare: seconds).",
        rich_help_panel=SLOS)] = None,
    tpot_slo: Annotated[str | None, typer.Option(
        help="TPOT SLO for goodput: 50ms, 0.05s.", rich_help_panel=SLOS)] = None,
    out: Annotated[Path | None, typer.Option(
        help="Per-request table (.csv or .parquet).", rich_help_panel=OUTPUT)] = None,
    json_out: Json = False,
    format_out: Format = None,
    stack: in_panel(StackOption, ENGINE) = None,
    kernel_model: KernelModel = "calibrated",
    host_speed: in_panel(HostSpeedOption, INTERNALS) = 1.0,
    weight_dtype: Annotated[str | None, typer.Option(
        help="Weights, e.g. int4.", rich_help_panel=MOE)] = None,
    kv_dtype: Annotated[str | None, typer.Option(
        help="KV-cache dtype.", rich_help_panel=MOE)] = None,
    ep: Annotated[int, typer.Option(
        help="Expert-parallel degree of MoE layers (divides tp x attention-dp).",
        rich_help_panel=MOE)] = 1,
    attention_dp: Annotated[int, typer.Option(
        help="Attention-DP ranks sharing an EP group (DeepSeek-style); each is a replica "
             "(--replicas defaults to them: one worker).",
        rich_help_panel=MOE)] = 1,
    moe_tp: Annotated[int | None, typer.Option(
        help="Tensor-parallel degree of each expert (default: tp x attention-dp / ep).",
        rich_help_panel=MOE)] = None,
    gemm_quant: Annotated[str | None, typer.Option(
        help="Dense GEMMs' scheme: fp8, fp8_block, nvfp4, mxfp4, int4_wo, int8_wo or bf16 "
             "(sets the dtypes).", rich_help_panel=MOE)] = None,
    moe_quant: Annotated[str | None, typer.Option(
        help="Expert GEMMs' scheme, as --gemm-quant.", rich_help_panel=MOE)] = None,
    expert_skew: Annotated[float, typer.Option(
        help="Most loaded EP rank's routed tokens / the mean (1: balanced).",
        rich_help_panel=MOE)] = DEFAULT_EXPERT_SKEW,
    router: Annotated[str, typer.Option(
        help="round-robin, least-outstanding or least-kv.", rich_help_panel=INTERNALS)
                      ] = "round-robin",
    block_size: Annotated[int, typer.Option(
        help="KV-cache tokens per block.", rich_help_panel=INTERNALS)] = 16,
    preemption: Annotated[str, typer.Option(
        help="recompute or swap.", rich_help_panel=INTERNALS)] = "recompute",
    gpu_memory_utilization: Annotated[float, typer.Option(
        help="The engine's memory fraction, a share of what --kv-budget says.",
        rich_help_panel=INTERNALS)] = 0.9,
    kv_budget: Annotated[str | None, typer.Option(
        help="What --gpu-memory-utilization is a share of: total (the CUDA total: vLLM, "
             "SGLang) or free (what the model leaves free: TensorRT-LLM's "
             "free_gpu_memory_fraction); default: the stack's.",
        rich_help_panel=INTERNALS)] = None,
    max_model_len: Annotated[int | None, typer.Option(
        help="Longest request, prompt + output (vLLM's --max-model-len); default: the "
             "model's max_position_embeddings. Longer drawn lengths are clipped and counted, "
             "fixed ones refused; above the model's context only when given.",
        rich_help_panel=INTERNALS)] = None,
    activation_quant: Annotated[str, typer.Option(
        help="fp8/fp4 activation quantisation: fused (in the producing kernel, as engines "
             "do) or separate (own kernels).", rich_help_panel=INTERNALS)] = "fused",
    allreduce: Annotated[str, typer.Option(
        help="TP all-reduce: custom (engines' one-shot kernel) or nccl.",
        rich_help_panel=INTERNALS)] = "custom",
    host_overlap: Annotated[bool, typer.Option(
        help="CPU scheduling overlaps the GPU step (SGLang/TRT-LLM, vLLM async).",
        rich_help_panel=INTERNALS)] = False,
    prefill_dispatch_us: Annotated[float | None, typer.Option(
        help="Host us per kernel of a prefill step (decode-only steps replay CUDA graphs); "
             "default: the stack's (perfcast stacks NAME).",
        rich_help_panel=INTERNALS)] = None,
    prefix_cache: Annotated[bool, typer.Option(
        help="Automatic prefix caching of shared prompt content.",
        rich_help_panel=INTERNALS)] = False,
    arrival: Annotated[str | None, typer.Option(
        help="poisson, gamma, trace or closed_loop (default: by --qps/--concurrency).",
        rich_help_panel=ARRIVALS)] = None,
    cv: Annotated[float | None, typer.Option(
        help="Gamma arrivals' coefficient of variation.", rich_help_panel=ARRIVALS)] = None,
    system_prompt_tokens: Annotated[int | None, typer.Option(
        help="Tokens of a system prompt shared by every prompt.", rich_help_panel=CHATS)
                                    ] = None,
    prompt_groups: Annotated[int, typer.Option(
        help="Distinct system prompts (one per request, at random).", rich_help_panel=CHATS)
                             ] = 1,
    turns: Annotated[int | None, typer.Option(
        help="Chats of N turns: a prompt is the chat so far plus --prompt-tokens; --qps then "
             "counts chats per second.", rich_help_panel=CHATS)] = None,
    think_s: Annotated[float, typer.Option(
        help="Seconds before a user's next turn.", rich_help_panel=CHATS)] = 0.0,
    spec_k: Annotated[int, typer.Option(
        help="Draft tokens proposed per step (0: off).", rich_help_panel=SPEC)] = 0,
    spec_draft_model: Annotated[str | None, typer.Option(
        help="Draft model (catalog name); none: draft-free (n-gram/self-speculation).",
        rich_help_panel=SPEC)] = None,
    spec_acceptance: Annotated[str, typer.Option(
        help="Per-token acceptance rate, or one per draft position (A1,A2,...).",
        rich_help_panel=SPEC)] = "0.7",
    spec_draft_gpu: Annotated[str, typer.Option(
        help="shared (draft on the target's GPUs) or separate.", rich_help_panel=SPEC)
                              ] = "shared",
    disagg_prefill: Annotated[str | None, typer.Option(
        help="The prefill pool: WORKERSx(KEYvalue,...) with keys tp, pp, ep, dp (attention "
             "DP), moe_tp, batch (max batch per DP rank), tokens (max batch tokens), e.g. "
             "'2x(tp8,ep8,dp8,batch256)'; or WORKERSxTP (2x4). Needs --disagg-decode.",
        rich_help_panel=DISAGG)] = None,
    disagg_decode: Annotated[str | None, typer.Option(
        help="The decode pool, as --disagg-prefill (same model, GPU and scheduler); wide "
             "EP: '1x(tp1,dp32,ep32)'.", rich_help_panel=DISAGG)] = None,
    colocate: Annotated[list[str] | None, typer.Option(
        help="More models on the same GPUs, each with a stream like the first (seeds seed+1, "
             "...); memory split evenly.", rich_help_panel=COLOCATE)] = None,
    colocate_sharing: Annotated[str, typer.Option(
        help="time-slice (one model's step at a time) or mps (fixed equal partitions).",
        rich_help_panel=COLOCATE)] = "time-slice",
    trace_out: Annotated[Path | None, typer.Option(
        help="Perfetto/Chrome-trace JSON file.", rich_help_panel=Advanced.TRACE)] = None,
) -> None:
    """Simulate serving under load: TTFT, TPOT, E2E, throughput, goodput, KV use."""
    answer(ServeRequest, locals(), _print, progress="serve: requests")


def _print(result: ServeResult) -> None:
    """Co-located and disaggregated runs as their JSON summary; one deployment as tables."""
    if result.mode != "single":
        new_console().print_json(json.dumps({"inputs": result.inputs, **result.metrics}))
        return
    _print_tables(result.metrics, result.inputs)


def _print_tables(s: dict, inputs: dict) -> None:
    t = Table(title=f"{inputs['model']}: {inputs['replicas']} x (TP{inputs['tp']} PP"
              f"{inputs['pp']}) {inputs['gpu'] or inputs['cluster']}, {inputs['scheduler']} "
              f"(<= {inputs['max_batch']} seqs, {inputs['max_batch_tokens']} tokens/step), "
              f"{s['num_requests']} requests")
    for col in ("metric", "mean", "p50", "p90", "p99"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queueing_s"):
        st = s[key]
        t.add_row(key.removesuffix("_s").upper() + " (ms)",
                  *(f"{st[q] * 1e3:.1f}" for q in ("mean", "p50", "p90", "p99")))
    console = new_console()
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
    stack = stack_summary(inputs.get("kernel_model", {}))
    if stack:
        lines.append(stack)
    engine = inputs.get("engine_defaults")
    if engine:
        lines.append(f"{', '.join(engine['from_stack'])} from the stack's engine defaults "
                     "(--json: engine_defaults.provenance)")
    console.print("\n".join(lines))
