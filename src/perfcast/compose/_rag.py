"""Retrieval-augmented generation, one request end to end: embed the query, search a vector
index, generate from the prompt with the retrieved chunks.

e2e = embed + search + prefill (the generator's TTFT on the augmented prompt) + decode.
The embedder's and the search's op tables (perfcast.ops.embed_ops, search_ops: FAISS's
index types, Johnson, Douze & Jégou 2017) are priced by the same kernel model, the search on
its own device; the generator is `forecast_inference`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perfcast.comm import CollectiveModel
from perfcast.compose._inference import InferenceForecast, forecast_inference
from perfcast.compose._step import Execution, StepForecast, step_time
from perfcast.errors import InputError
from perfcast.kernels import ExecutionTimeModel
from perfcast.ops import VectorIndex, embed_ops, search_ops
from perfcast.specs import (
    Cluster,
    ModelSpec,
    ParallelPlan,
    Precision,
    bytes_per_element,
    cluster_for,
    cuda_total_bytes,
)

__all__ = ["RAGForecast", "forecast_rag"]


@dataclass(frozen=True)
class RAGForecast:
    """One RAG request; `breakdown` parts sum to `e2e_s`."""

    embed_s: float
    search_s: float
    prefill_s: float
    decode_s: float
    prompt_tokens: int
    index_bytes: float
    search_bytes: float
    search_device: str
    generation: InferenceForecast
    embed: StepForecast
    search: StepForecast
    notes: list[str] = field(default_factory=list)

    @property
    def e2e_s(self) -> float:
        return self.embed_s + self.search_s + self.prefill_s + self.decode_s

    @property
    def ttft_s(self) -> float:
        """Query in -> first generated token out."""
        return self.embed_s + self.search_s + self.prefill_s

    def as_dict(self) -> dict:
        return {
            "e2e_s": self.e2e_s, "ttft_s": self.ttft_s, "tpot_s": self.generation.tpot_s,
            "breakdown": {"embed_s": self.embed_s, "search_s": self.search_s,
                          "prefill_s": self.prefill_s, "decode_s": self.decode_s},
            "prompt_tokens": self.prompt_tokens, "search_device": self.search_device,
            "index_bytes": self.index_bytes, "search_bytes": self.search_bytes,
            "search_ops_s": {str(r.op): float(r.total_s) for r in self.search.ops.itertuples()},
            "generator_memory_bytes": self.generation.memory.as_dict(), "notes": self.notes,
        }


def forecast_rag(generator: ModelSpec, embedder: ModelSpec, cluster: Cluster,
                 index: VectorIndex, *, search_cluster: Cluster | None = None,
                 query_tokens: int = 32, top_k: int = 5, chunk_tokens: int = 512,
                 output_tokens: int = 256, precision: Precision | None = None,
                 plan: ParallelPlan | None = None,
                 execution: Execution | str = Execution.CUDA_GRAPH,
                 embed_execution: Execution | str = Execution.EAGER, host: str = "vllm-v0",
                 time_model: ExecutionTimeModel | None = None,
                 comm_model: CollectiveModel | None = None) -> RAGForecast:
    """One request: the embedder (eager PyTorch, as sentence-transformers runs) on the
    generator's first GPU, the search on `search_cluster`'s device (default: that GPU,
    sharing its memory), then `forecast_inference` on query + top_k x chunk_tokens."""
    precision = precision or Precision()
    plan = plan or ParallelPlan()
    if int(chunk_tokens) != chunk_tokens or chunk_tokens < 1:
        raise InputError("chunk_tokens", f"must be a whole number >= 1, got {chunk_tokens}",
                         ">= 1")
    embed = step_time(embed_ops(embedder, query_tokens, precision), cluster_for(cluster.device),
                      embed_execution, 0.0, time_model)
    on_gpu = search_cluster is None
    search_box = cluster_for(cluster.device) if on_gpu else search_cluster
    table = search_ops(index, top_k)
    search = step_time(table, search_box, Execution.CUDA_GRAPH, 0.0, time_model)
    prompt = int(query_tokens + top_k * chunk_tokens)
    limit = generator.max_position_embeddings
    if limit and prompt + output_tokens > limit:
        raise InputError("prompt_tokens", f"query + top_k x chunk_tokens + output = "
                         f"{prompt + output_tokens} exceeds {generator.name}'s {limit} "
                         "positions", f"<= {limit}")
    gen = forecast_inference(generator, cluster, prompt_tokens=prompt,
                             output_tokens=output_tokens, precision=precision, plan=plan,
                             execution=execution, host=host, time_model=time_model,
                             comm_model=comm_model)
    _check_memory(index, search_box, gen if on_gpu else None, embedder, precision)
    notes = ["search: one query; FAISS's C++ kernel launches carry no Python dispatch cost"]
    return RAGForecast(
        embed_s=embed.time_s, search_s=search.time_s, prefill_s=gen.ttft_s,
        decode_s=gen.e2e_s - gen.ttft_s, prompt_tokens=prompt, index_bytes=index.index_bytes(),
        search_bytes=float(((table["bytes_read"] + table["bytes_written"]) * table["count"])
                           .sum()),
        search_device=search_box.device.name, generation=gen, embed=embed, search=search,
        notes=notes)


def _check_memory(index: VectorIndex, box: Cluster, gen: InferenceForecast | None,
                  embedder: ModelSpec, precision: Precision) -> None:
    """The index must fit the search device, beside the generator and embedder on a GPU."""
    need = index.index_bytes()
    if gen is not None:
        need += gen.memory.total_bytes + embedder.total_params() * bytes_per_element(
            precision.weights)
    capacity = cuda_total_bytes(box.device)[0]
    if need > capacity:
        raise InputError("index_vectors", f"index {index.index_bytes() / 1e9:.1f} GB"
                         + (" + generator and embedder" if gen else "")
                         + f" = {need / 1e9:.1f} GB exceeds {box.device.name}'s "
                         f"{capacity / 1e9:.1f} GB",
                         "fewer --index-vectors, --index ivf-pq, or --search-device cpu")
