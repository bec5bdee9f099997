"""The operator table: one row per distinct kernel of a step, as plain columns."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = ["COLUMNS", "COMM_FAMILIES", "TENSOR_FAMILIES", "OpRows"]

# Shape convention per family (b, m, n, k):
#   gemm            b GEMMs of [m, k] x [k, n] (b > 1: grouped/batched, e.g. MoE experts)
#   attn_prefill    b = sequences x heads, m = query tokens, n = mean keys attended, k = head dim
#   attn_decode     same with m = 1
#   vector families m = tokens (or elements), n = width
#   collectives     m = message bytes, n = group size
COLUMNS = ["layer", "op", "family", "phase", "b", "m", "n", "k", "flops", "bytes_read",
           "bytes_written", "dtype", "count"]
# Families whose 16/8-bit rows run on the matrix units (tensor cores). `conv` is cuDNN's
# implicit GEMM (m = N·P·Q, n = C_out, k = C_in·R·S): its fp16/bf16 kernels run on the
# tensor cores like a GEMM; its fp32 rows stay on the SIMT peak they were fitted on
# (perfcast.kernels._roofline.SIMT_FP32_FAMILIES).
TENSOR_FAMILIES = frozenset({"gemm", "attn_prefill", "attn_decode", "conv"})
COMM_FAMILIES = frozenset({"allreduce", "allgather", "reducescatter", "alltoall", "sendrecv"})
# Op-name configuration suffix (`op:fused_quant`) of a W8A8/W4A4 GEMM whose producer already
# wrote its quantised input (Precision.activation_quant == "fused").
FUSED_QUANT = "fused_quant"
_TYPED = {"b": "int64", "m": "float64", "n": "float64", "k": "float64", "flops": "float64",
          "bytes_read": "float64", "bytes_written": "float64", "count": "int64"}


@dataclass
class OpRows:
    """Accumulates op rows; `frame()` returns the table."""

    rows: list[dict] = field(default_factory=list)

    def add(self, layer: str, op: str, family: str, phase: str, *, b: int = 1, m: float = 0,
            n: float = 0, k: float = 0, flops: float = 0.0, bytes_read: float = 0.0,
            bytes_written: float = 0.0, dtype: str, count: int = 1) -> None:
        if count <= 0 or (flops == 0 and bytes_read == 0 and bytes_written == 0 and m == 0):
            return
        self.rows.append({
            "layer": layer, "op": op, "family": family, "phase": phase, "b": b, "m": m, "n": n,
            "k": k, "flops": float(flops), "bytes_read": float(bytes_read),
            "bytes_written": float(bytes_written), "dtype": str(dtype), "count": count,
        })

    def frame(self) -> pd.DataFrame:
        """The rows as a table: shape and count columns int64 / float64, the rest as given.
        Built column by column (a per-row frame and a cast took ~4x as long)."""
        if not self.rows:
            return pd.DataFrame(self.rows, columns=COLUMNS).astype(
                {c: _TYPED[c] for c in ("b", "m", "n", "k", "count")})
        return pd.DataFrame({c: np.array([r[c] for r in self.rows], dtype=_TYPED[c])
                             if c in _TYPED else [r[c] for r in self.rows] for c in COLUMNS},
                            columns=COLUMNS)
