"""`perfcast rag`: one retrieval-augmented request, embed -> vector search -> generate."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from perfcast import __version__
from perfcast.api._choices import kernel_model, machines_for
from perfcast.api._choices import precision_spec as _precision
from perfcast.api._infer import inference_plan as _plan
from perfcast.cli._common import (
    CalibrationOption,
    HostOption,
    JsonOption,
    KernelModelOption,
    emit_json,
    guarded,
)
from perfcast.compose import Execution, RAGForecast, forecast_rag
from perfcast.errors import InputError
from perfcast.ops import INDEX_KINDS, VectorIndex
from perfcast.specs import cluster_for, get_device, get_model

__all__ = ["rag"]

SEARCH_DEVICES = ("gpu", "cpu")


@guarded
def rag(
    model: Annotated[str, typer.Option(help="Generator LLM (catalog name or HF id).")] = (
        "llama-3-8b"),
    embed_model: Annotated[str, typer.Option(help="BERT-style embedding model.")] = (
        "bge-large-en-v1.5"),
    gpu: Annotated[str | None, typer.Option(help="Catalog GPU name (see `hardware list`).")] = (
        None),
    cluster: Annotated[str | None, typer.Option(help="Cluster preset instead of --gpu.")] = None,
    tp: Annotated[int | None, typer.Option(help="Generator tensor-parallel degree.")] = None,
    query_tokens: Annotated[int, typer.Option(help="Query length in tokens.")] = 32,
    top_k: Annotated[int, typer.Option(help="Chunks retrieved into the prompt.")] = 5,
    chunk_tokens: Annotated[int, typer.Option(help="Tokens per retrieved chunk.")] = 512,
    output_tokens: Annotated[int, typer.Option(help="Generated tokens.")] = 256,
    index: Annotated[str, typer.Option(help=f"Vector index: {', '.join(INDEX_KINDS)}.")] = (
        "flat"),
    index_vectors: Annotated[int, typer.Option(help="Vectors in the index.")] = 10_000_000,
    dim: Annotated[int | None, typer.Option(help="Vector width (default: the embedding "
                                            "model's hidden size).")] = None,
    vector_dtype: Annotated[str, typer.Option(help="Stored vector dtype (flat, ivf-flat).")] = (
        "fp32"),
    nlist: Annotated[int, typer.Option(help="IVF lists (coarse centroids).")] = 16_384,
    nprobe: Annotated[int, typer.Option(help="IVF lists scanned per query.")] = 32,
    pq_bytes: Annotated[int, typer.Option(help="PQ code bytes per vector (ivf-pq).")] = 64,
    search_device: Annotated[str, typer.Option(help="gpu (beside the generator) or cpu.")] = (
        "gpu"),
    cpu: Annotated[str, typer.Option(help="CPU spec for --search-device cpu.")] = "epyc-9654",
    dtype: Annotated[str, typer.Option(help="Activation (and weight) dtype.")] = "bf16",
    execution: Annotated[Execution, typer.Option(help="Generator kernel launch mode.")] = (
        Execution.CUDA_GRAPH),
    embed_execution: Annotated[Execution, typer.Option(help="Embedder launch mode.")] = (
        Execution.EAGER),
    host: HostOption = "vllm-v0",
    kernel_model_name: KernelModelOption = "calibrated",
    calibration: CalibrationOption = None,
    json_out: JsonOption = False,
) -> None:
    """Forecast a RAG request's end-to-end latency: embed, search, prefill, decode."""
    if search_device not in SEARCH_DEVICES:
        raise InputError("search_device", f"unknown {search_device!r}", SEARCH_DEVICES)
    generator, embedder = get_model(model), get_model(embed_model)
    plan = _plan(tp, None)
    box = machines_for(gpu, cluster, plan.tp)
    search_box = None
    if search_device == "cpu":
        search_box = cluster_for(get_device(cpu), 1)
        if search_box.device.kind != "cpu":
            raise InputError("cpu", f"{search_box.device.name} is not a CPU",
                             "a CPU target, e.g. epyc-9654")
    vindex = VectorIndex(kind=index, vectors=index_vectors, dim=dim or embedder.hidden_size,
                         dtype=vector_dtype, nlist=nlist, nprobe=nprobe, pq_bytes=pq_bytes)
    time_model, info = kernel_model(kernel_model_name, calibration, box.device)
    fc = forecast_rag(generator, embedder, box, vindex, search_cluster=search_box,
                      query_tokens=query_tokens, top_k=top_k, chunk_tokens=chunk_tokens,
                      output_tokens=output_tokens, precision=_precision(dtype, None, None),
                      plan=plan, execution=execution, embed_execution=embed_execution,
                      host=host, time_model=time_model)
    inputs = {"model": generator.name, "embed_model": embedder.name, "gpu": box.device.name,
              "tp": plan.tp, "query_tokens": query_tokens, "top_k": top_k,
              "chunk_tokens": chunk_tokens, "output_tokens": output_tokens,
              "index": {"kind": vindex.kind, "vectors": vindex.vectors, "dim": vindex.dim,
                        "vector_dtype": vindex.dtype, "nlist": vindex.nlist,
                        "nprobe": vindex.nprobe, "pq_bytes": vindex.pq_bytes},
              "search_device": fc.search_device, "dtype": dtype, "kernel_model": info}
    if json_out:
        emit_json({"perfcast_version": __version__, "inputs": inputs, **fc.as_dict()})
    else:
        _print(fc, inputs)


def _print(fc: RAGForecast, inputs: dict) -> None:
    ix = inputs["index"]
    t = Table(title=f"RAG: {inputs['embed_model']} -> {ix['kind']} index of {ix['vectors']:,} "
              f"x {ix['dim']} on {fc.search_device} -> {inputs['model']} on {inputs['tp']}x "
              f"{inputs['gpu']}")
    t.add_column("part")
    t.add_column("seconds", justify="right")
    t.add_column("share", justify="right")
    for name, value in fc.as_dict()["breakdown"].items():
        t.add_row(name.removesuffix("_s"), f"{value:.6f}", f"{value / fc.e2e_s:.1%}")
    t.add_row("end-to-end", f"{fc.e2e_s:.6f}", "100%")
    console = Console()
    console.print(t)
    console.print(f"prompt after retrieval: {fc.prompt_tokens} tokens; time to first token "
                  f"{fc.ttft_s * 1e3:.1f} ms; index {fc.index_bytes / 1e9:.2f} GB; one query "
                  f"reads {fc.search_bytes / 1e9:.3f} GB")
    for note in fc.notes:
        console.print(f"note: {note}")
