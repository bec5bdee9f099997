"""`rag`: one retrieval-augmented request, embed -> vector search -> generate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field

from perfcast import __version__
from perfcast.api._base import Group, Request, register
from perfcast.api._choices import (
    Hardware,
    KernelChoice,
    precision_spec,
    serving_collective_model,
)
from perfcast.api._infer import inference_plan
from perfcast.api._units import MAX_GPUS, MAX_TOKENS
from perfcast.compose import HOST_PROFILES, Execution
from perfcast.errors import InputError
from perfcast.ops import INDEX_KINDS, VectorIndex
from perfcast.specs import (
    Cluster,
    ModelSpec,
    ParallelPlan,
    Precision,
    cluster_for,
    get_device,
    get_model,
)

if TYPE_CHECKING:  # the pricing layers load when a request runs, not for `rag --help`
    from perfcast.comm import CollectiveModel
    from perfcast.compose import RAGForecast
    from perfcast.kernels import ExecutionTimeModel

__all__ = ["SEARCH_DEVICES", "RagEngine", "RagIndex", "RagModels", "RagPlan", "RagRequest",
           "RagResult", "RagWorkload", "ResolvedRag"]

SEARCH_DEVICES = ("gpu", "cpu")
MAX_VECTORS = 10**12  # vectors in one index: 1000x the largest public billion-scale sets


class RagModels(Group):
    """The generator LLM and the embedding model that encodes the query."""

    model: str = Field("llama-3-8b", description="Generator LLM (catalog name or HF id).")
    embed_model: str = Field("bge-large-en-v1.5", description="BERT-style embedding model.")


class RagPlan(Group):
    """The generator runs on one tensor-parallel group."""

    tp: int | None = Field(None, ge=1, le=MAX_GPUS, description="Generator tensor-parallel "
                           "degree.")

    def spec(self) -> ParallelPlan:
        return inference_plan(self.tp, None)


class RagWorkload(Group):
    """One query, the chunks retrieved into its prompt, and the answer."""

    query_tokens: int = Field(32, ge=1, le=MAX_TOKENS, description="Query length in tokens.")
    top_k: int = Field(5, ge=1, le=100_000, description="Chunks retrieved into the prompt.")
    chunk_tokens: int = Field(512, ge=1, le=MAX_TOKENS, description="Tokens per retrieved "
                              "chunk.")
    output_tokens: int = Field(256, ge=0, le=MAX_TOKENS, description="Generated tokens.")


class RagIndex(Group):
    """The vector index and where it is searched."""

    index: str = Field("flat", description=f"Vector index: {', '.join(INDEX_KINDS)}.")
    index_vectors: int = Field(10_000_000, ge=1, le=MAX_VECTORS, description="Vectors in the "
                               "index.")
    dim: int | None = Field(None, ge=1, le=65_536, description="Vector width (default: the "
                            "embedding model's hidden size).")
    vector_dtype: str = Field("fp32", description="Stored vector dtype (flat, ivf-flat).")
    nlist: int = Field(16_384, ge=1, le=MAX_VECTORS, description="IVF lists (coarse "
                       "centroids).")
    nprobe: int = Field(32, ge=1, le=MAX_VECTORS, description="IVF lists scanned per query.")
    pq_bytes: int = Field(64, ge=1, le=65_536, description="PQ code bytes per vector "
                          "(ivf-pq).")
    search_device: str = Field("gpu", description="gpu (beside the generator) or cpu.")
    cpu: str = Field("epyc-9654", description="CPU spec for --search-device cpu.")

    def search_machines(self) -> Cluster | None:
        """The CPU that searches the index, or None when the generator's GPU does."""
        if self.search_device != "cpu":
            return None
        box = cluster_for(get_device(self.cpu), 1)
        if box.device.kind != "cpu":
            raise InputError("cpu", f"{box.device.name} is not a CPU",
                             "a CPU target, e.g. epyc-9654")
        return box

    def spec(self, embedder: ModelSpec) -> VectorIndex:
        if self.nprobe > self.nlist:
            raise InputError("nprobe", f"{self.nprobe} lists scanned of --nlist {self.nlist}",
                             f"<= --nlist ({self.nlist})")
        return VectorIndex(kind=self.index, vectors=self.index_vectors,
                           dim=embedder.hidden_size if self.dim is None else self.dim,
                           dtype=self.vector_dtype,
                           nlist=self.nlist, nprobe=self.nprobe, pq_bytes=self.pq_bytes)


class RagEngine(Group):
    """How the generator and the embedder launch kernels, and the engine's host cost."""

    dtype: str = Field("bf16", description="Activation (and weight) dtype.")
    execution: Execution = Field(Execution.CUDA_GRAPH, description="Generator kernel launch "
                                 "mode.")
    embed_execution: Execution = Field(Execution.EAGER, description="Embedder launch mode.")
    host: str = Field("vllm-v0", description="Per-step host overhead of the serving engine: "
                      + ", ".join(HOST_PROFILES) + ".")


class RagRequest(Request):
    """End-to-end latency of a RAG request: embed, search, prefill, decode."""

    command = "rag"
    models: RagModels = RagModels()
    hardware: Hardware = Hardware()
    plan: RagPlan = RagPlan()
    workload: RagWorkload = RagWorkload()
    search: RagIndex = RagIndex()
    engine: RagEngine = RagEngine()
    kernels: KernelChoice = KernelChoice()


@dataclass(frozen=True)
class ResolvedRag:
    request: RagRequest
    generator: ModelSpec
    embedder: ModelSpec
    plan: ParallelPlan
    machines: Cluster
    search_machines: Cluster | None
    index: VectorIndex
    precision: Precision
    time_model: ExecutionTimeModel
    kernel_info: dict[str, Any]
    comm_model: CollectiveModel


def resolve_rag(request: RagRequest) -> ResolvedRag:
    search = request.search
    if search.search_device not in SEARCH_DEVICES:
        raise InputError("search_device", f"unknown {search.search_device!r}", SEARCH_DEVICES)
    generator, embedder = get_model(request.models.model), get_model(request.models.embed_model)
    plan = request.plan.spec()
    box = request.hardware.machines(plan.tp)
    search_box = search.search_machines()
    index = search.spec(embedder)
    time_model, info = request.kernels.resolve(box.device)
    precision = precision_spec(request.engine.dtype, None, None)
    return ResolvedRag(request, generator, embedder, plan, box, search_box, index, precision,
                       time_model, info, serving_collective_model())


@dataclass(frozen=True)
class RagResult:
    request: RagRequest
    inputs: dict[str, Any]
    forecast: RAGForecast

    def payload(self) -> dict[str, Any]:
        return {"perfcast_version": __version__, "inputs": self.inputs,
                **self.forecast.as_dict()}


def execute_rag(r: ResolvedRag) -> RagResult:
    from perfcast.compose import forecast_rag

    w, e, ix = r.request.workload, r.request.engine, r.index
    fc = forecast_rag(r.generator, r.embedder, r.machines, ix, search_cluster=r.search_machines,
                      query_tokens=w.query_tokens, top_k=w.top_k, chunk_tokens=w.chunk_tokens,
                      output_tokens=w.output_tokens, precision=r.precision, plan=r.plan,
                      execution=e.execution, embed_execution=e.embed_execution, host=e.host,
                      time_model=r.time_model, comm_model=r.comm_model)
    inputs = {"model": r.generator.name, "embed_model": r.embedder.name,
              "gpu": r.machines.device.name, "tp": r.plan.tp, "query_tokens": w.query_tokens,
              "top_k": w.top_k, "chunk_tokens": w.chunk_tokens,
              "output_tokens": w.output_tokens,
              "index": {"kind": ix.kind, "vectors": ix.vectors, "dim": ix.dim,
                        "vector_dtype": ix.dtype, "nlist": ix.nlist, "nprobe": ix.nprobe,
                        "pq_bytes": ix.pq_bytes},
              "search_device": fc.search_device, "dtype": e.dtype, "kernel_model": r.kernel_info}
    return RagResult(r.request, inputs, fc)


register(RagRequest, resolve_rag, execute_rag)
