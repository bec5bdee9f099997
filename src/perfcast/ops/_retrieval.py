"""One vector-search query and one embedding-model query as op tables.

FAISS's index types (Johnson, Douze & Jégou 2017, "Billion-scale similarity search with
GPUs", arXiv:1702.08734): `flat` scans every vector (distances, then k-selection); `ivf-*`
first scans the `nlist` coarse centroids, keeps the `nprobe` nearest lists and scans only
their vectors, N·nprobe/nlist in expectation (balanced lists); `ivf-pq` stores `pq_bytes`
one-byte sub-quantiser codes per vector and scans them through per-list lookup tables (ADC,
Jégou et al. 2011), each table 256 entries per sub-quantiser. Scans are streaming
`elementwise` rows (a GEMV per query is bandwidth-bound), selections `sampling` rows (a
top-k over candidates, like token sampling over a vocabulary).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfcast.errors import InputError
from perfcast.ops._batch import Batch
from perfcast.specs import ModelSpec, ParallelPlan, Precision, bytes_per_element, parse_dtype

if TYPE_CHECKING:  # op tables are built when priced, not when `rag --help` lists the kinds
    import pandas as pd

    from perfcast.ops._table import OpRows

__all__ = ["INDEX_KINDS", "VectorIndex", "embed_ops", "search_ops"]

INDEX_KINDS = ("flat", "ivf-flat", "ivf-pq")
_PQ_CENTROIDS = 256  # 8-bit codes: 256 centroids per sub-quantiser
_ID_BYTES = 8  # FAISS idx_t (int64) per stored vector in inverted lists
_DIST_BYTES = 4  # fp32 distances


@dataclass(frozen=True)
class VectorIndex:
    """A FAISS-style index of `vectors` embeddings of `dim` values (see module docstring)."""

    kind: str = "flat"
    vectors: int = 10_000_000
    dim: int = 1024
    dtype: str = "fp32"
    nlist: int = 16_384
    nprobe: int = 32
    pq_bytes: int = 64

    def __post_init__(self) -> None:
        if self.kind not in INDEX_KINDS:
            raise InputError("index", f"unknown index {self.kind!r}", INDEX_KINDS)
        for name in ("vectors", "dim", "nlist", "nprobe", "pq_bytes"):
            value = getattr(self, name)
            if int(value) != value or value < 1:
                raise InputError(name, f"must be a whole number >= 1, got {value}", ">= 1")
        if self.kind != "flat" and not self.nprobe <= self.nlist <= self.vectors:
            raise InputError("nprobe", f"need nprobe <= nlist <= vectors, got {self.nprobe}, "
                             f"{self.nlist}, {self.vectors}", "1 <= nprobe <= nlist")
        if self.kind == "ivf-pq" and self.dim % self.pq_bytes:
            raise InputError("pq_bytes", f"{self.pq_bytes} sub-quantisers do not divide "
                             f"dim {self.dim}", "a divisor of --dim")
        parse_dtype(self.dtype, "vector_dtype")

    @property
    def elem_bytes(self) -> float:
        return bytes_per_element(parse_dtype(self.dtype))

    @property
    def scanned_vectors(self) -> float:
        """Vectors whose distance one query computes."""
        return float(self.vectors) if self.kind == "flat" else (
            self.vectors * self.nprobe / self.nlist)

    def index_bytes(self) -> float:
        """Resident bytes: vectors (or codes), list ids, coarse centroids, PQ codebooks."""
        if self.kind == "flat":
            return self.vectors * self.dim * self.elem_bytes
        per_vector = self.dim * self.elem_bytes if self.kind == "ivf-flat" else self.pq_bytes
        extra = _PQ_CENTROIDS * self.dim * _DIST_BYTES if self.kind == "ivf-pq" else 0.0
        return self.vectors * (per_vector + _ID_BYTES) + self.nlist * self.dim * 4.0 + extra


def _scan(rows: OpRows, op: str, vectors: float, width: float, code_bytes: float,
          flops_per_vector: float) -> None:
    """Streaming distance computation: read each vector's code, write its distance."""
    rows.add("search", op, "elementwise", "search", m=vectors, n=width,
             flops=flops_per_vector * vectors, bytes_read=vectors * code_bytes,
             bytes_written=vectors * _DIST_BYTES, dtype="fp32")


def _select(rows: OpRows, op: str, candidates: float, k: int) -> None:
    """k-selection over the candidates' distances (FAISS's warp-select / a heap on CPU)."""
    rows.add("search", op, "sampling", "search", m=1, n=candidates, flops=5.0 * candidates,
             bytes_read=_DIST_BYTES * candidates, bytes_written=(_DIST_BYTES + _ID_BYTES) * k,
             dtype="fp32")


def search_ops(index: VectorIndex, top_k: int = 5) -> pd.DataFrame:
    """The op table of one query against `index`, returning `top_k` neighbours."""
    from perfcast.ops._table import OpRows

    if int(top_k) != top_k or top_k < 1:
        raise InputError("top_k", f"must be a whole number >= 1, got {top_k}", ">= 1")
    rows, d = OpRows(), index.dim
    if index.kind != "flat":  # coarse quantiser: fp32 centroids, keep the nprobe nearest
        _scan(rows, "coarse_scan", index.nlist, d, d * 4.0, 2.0 * d)
        _select(rows, "coarse_select", index.nlist, index.nprobe)
    n = index.scanned_vectors
    if index.kind == "ivf-pq":  # per probed list: 256 entries per sub-quantiser, 2·dsub each
        m = index.pq_bytes
        rows.add("search", "lut_build", "elementwise", "search", m=index.nprobe,
                 n=m * _PQ_CENTROIDS, flops=2.0 * index.nprobe * _PQ_CENTROIDS * d,
                 bytes_read=_PQ_CENTROIDS * d * _DIST_BYTES,
                 bytes_written=index.nprobe * m * _PQ_CENTROIDS * _DIST_BYTES, dtype="fp32")
        _scan(rows, "code_scan", n, m, float(m), float(m))  # a table lookup + add per byte
    else:
        _scan(rows, "scan", n, d, d * index.elem_bytes, 2.0 * d)
    _select(rows, "topk", n, min(int(top_k), int(n)))
    return rows.frame()


def embed_ops(model: ModelSpec, query_tokens: int, precision: Precision) -> pd.DataFrame:
    """A BERT-style embedding model on one query: the encoder layers of `step_ops` without
    its LM head, then BertModel's pooler (dense + tanh on [CLS]) and the L2 normalisation."""
    import pandas as pd

    from perfcast.ops._table import OpRows
    from perfcast.ops._transformer import step_ops

    if model.kind != "encoder":
        raise InputError("embed_model", f"{model.name} is a {model.kind}, not an encoder",
                         "a BERT-style encoder, e.g. bge-large-en-v1.5")
    limit = model.max_position_embeddings
    if limit and query_tokens > limit:
        raise InputError("query_tokens", f"{query_tokens} exceeds {model.name}'s {limit} "
                         "positions", f"<= {limit}")
    ops = step_ops(model, Batch.prefill(1, query_tokens), precision, ParallelPlan(),
                   all_logits=True)
    body = ops[ops["layer"] != "head"]
    rows, h = OpRows(), model.hidden_size
    e, dtype = bytes_per_element(precision.activations), precision.activations.value
    rows.add("pooler", "dense", "gemm", "prefill", m=1, n=h, k=h, flops=2.0 * h * h,
             bytes_read=e * (h + h * h), bytes_written=e * h, dtype=dtype)
    rows.add("pooler", "tanh", "activation", "prefill", m=1, n=h, flops=8.0 * h,
             bytes_read=e * h, bytes_written=e * h, dtype=dtype)
    rows.add("pooler", "l2_normalize", "norm", "prefill", m=1, n=h, flops=3.0 * h,
             bytes_read=e * h, bytes_written=e * h, dtype=dtype)
    return pd.concat([body, rows.frame()], ignore_index=True)
