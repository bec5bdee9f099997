"""`perfcast rag`: one retrieval-augmented request, embed -> vector search -> generate."""

from __future__ import annotations

from typing import Annotated

import typer

from perfcast.api import RagRequest, RagResult
from perfcast.cli._common import (
    CalibrationMismatchOption,
    CalibrationOption,
    FormatOption,
    HostOption,
    JsonOption,
    KernelModelOption,
    answer,
    guarded,
)
from perfcast.cli._console import (
    Advanced,
    Table,
    calibration_lines,
    in_panel,
    new_console,
)
from perfcast.compose import Execution
from perfcast.ops import INDEX_KINDS

__all__ = ["rag"]


# Help panels after the models and hardware (typer's "Options"); the advanced ones wait for
# --help-all.
REQUEST, RETRIEVAL, OUTPUT = "Request", "Retrieval", "Output"
DETAILS, KERNELS = Advanced.SEARCH, Advanced.KERNELS
Host = in_panel(HostOption, KERNELS)
KernelModel = in_panel(KernelModelOption, KERNELS)
Calibration = in_panel(CalibrationOption, KERNELS)
CalibrationMismatch = in_panel(CalibrationMismatchOption, KERNELS)
Json = in_panel(JsonOption, OUTPUT)
Format = in_panel(FormatOption, OUTPUT)


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
    dtype: Annotated[str, typer.Option(help="Activation (and weight) dtype.")] = "bf16",
    query_tokens: Annotated[int, typer.Option(
        help="Query length in tokens.", rich_help_panel=REQUEST)] = 32,
    top_k: Annotated[int, typer.Option(
        help="Chunks retrieved into the prompt.", rich_help_panel=REQUEST)] = 5,
    chunk_tokens: Annotated[int, typer.Option(
        help="Tokens per retrieved chunk.", rich_help_panel=REQUEST)] = 512,
    output_tokens: Annotated[int, typer.Option(
        help="Generated tokens.", rich_help_panel=REQUEST)] = 256,
    index: Annotated[str, typer.Option(
        help=f"Vector index: {', '.join(INDEX_KINDS)}.", rich_help_panel=RETRIEVAL)] = "flat",
    index_vectors: Annotated[int, typer.Option(
        help="Vectors in the index.", rich_help_panel=RETRIEVAL)] = 10_000_000,
    search_device: Annotated[str, typer.Option(
        help="gpu (beside the generator) or cpu.", rich_help_panel=RETRIEVAL)] = "gpu",
    json_out: Json = False,
    format_out: Format = None,
    dim: Annotated[int | None, typer.Option(
        help="Vector width (default: the embedding model's hidden size).",
        rich_help_panel=DETAILS)] = None,
    vector_dtype: Annotated[str, typer.Option(
        help="Stored vector dtype (flat, ivf-flat).", rich_help_panel=DETAILS)] = "fp32",
    nlist: Annotated[int, typer.Option(
        help="IVF lists (coarse centroids).", rich_help_panel=DETAILS)] = 16_384,
    nprobe: Annotated[int, typer.Option(
        help="IVF lists scanned per query.", rich_help_panel=DETAILS)] = 32,
    pq_bytes: Annotated[int, typer.Option(
        help="PQ code bytes per vector (ivf-pq).", rich_help_panel=DETAILS)] = 64,
    cpu: Annotated[str, typer.Option(
        help="CPU spec for --search-device cpu.", rich_help_panel=DETAILS)] = "epyc-9654",
    execution: Annotated[Execution, typer.Option(
        help="Generator kernel launch mode.", rich_help_panel=KERNELS)] = Execution.CUDA_GRAPH,
    embed_execution: Annotated[Execution, typer.Option(
        help="Embedder launch mode.", rich_help_panel=KERNELS)] = Execution.EAGER,
    host: Host = "vllm-v0",
    kernel_model: KernelModel = "calibrated",
    calibration: Calibration = None,
    force_calibration: CalibrationMismatch = False,
) -> None:
    """Forecast a RAG request's end-to-end latency: embed, search, prefill, decode."""
    answer(RagRequest, locals(), _print)


def _print(result: RagResult) -> None:
    fc, inputs = result.forecast, result.inputs
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
    console = new_console()
    console.print(t)
    console.print(f"prompt after retrieval: {fc.prompt_tokens} tokens; time to first token "
                  f"{fc.ttft_s * 1e3:.1f} ms; index {fc.index_bytes / 1e9:.2f} GB; one query "
                  f"reads {fc.search_bytes / 1e9:.3f} GB")
    for note in fc.notes:
        console.print(f"note: {note}")
    km = result.payload().get("inputs", {}).get("kernel_model", {})
    for line in calibration_lines(km):
        console.print(line, markup=False)
