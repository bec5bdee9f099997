"""`perfcast serve`: a serving deployment under load, simulated request by request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from perfcast import __version__
from perfcast.cli._common import emit_json, guarded
from perfcast.cli._infer import _precision
from perfcast.errors import InputError
from perfcast.serve import ServeConfig, make_workload, simulate

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
    ttft_slo: Annotated[float | None, typer.Option(help="TTFT SLO (s) for goodput.")] = None,
    tpot_slo: Annotated[float | None, typer.Option(help="TPOT SLO (s) for goodput.")] = None,
    seed: Annotated[int, typer.Option(help="Workload seed.")] = 0,
    out: Annotated[Path | None, typer.Option(help="Per-request table (.csv or .parquet).")
                   ] = None,
    trace_out: Annotated[Path | None, typer.Option(help="Perfetto/Chrome-trace JSON file.")
                         ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
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
        host_overlap=host_overlap, allreduce=allreduce,
        precision=_precision(dtype, kv_dtype, weight_dtype, activation_quant))
    defaults = {"fixed": (512, 128)}.get(lengths, (None, None))
    workload = make_workload(
        num_requests, arrival=arrival, qps=qps, cv=cv, concurrency=concurrency,
        lengths=lengths, prompt_tokens=_pair(prompt_tokens, "prompt_tokens") or defaults[0],
        output_tokens=_pair(output_tokens, "output_tokens") or defaults[1], trace=trace,
        csv=csv, seed=seed)
    result = simulate(config, workload, seed=seed, timeline=trace_out is not None)
    summary = result.summary(ttft_slo, tpot_slo)
    if out is not None:
        (result.to_csv if out.suffix == ".csv" else result.to_parquet)(out)
    if trace_out is not None:
        trace_out.write_text(json.dumps(result.chrome_trace()))
    inputs = {"model": config.model if isinstance(config.model, str) else config.model.name,
              "gpu": gpu_name, "cluster": cluster, "tp": tp, "pp": pp, "replicas": replicas,
              "scheduler": scheduler, "router": router, "arrival": arrival, "qps": qps,
              "concurrency": concurrency, "num_requests": num_requests, "lengths": lengths,
              "seed": seed}
    if json_out:
        emit_json({"perfcast_version": __version__, "inputs": inputs, **summary})
    else:
        _print(summary, inputs)


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
    console.print("\n".join(lines))
