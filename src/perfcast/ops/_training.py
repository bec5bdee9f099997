"""Training step ops: the forward table, its backward kernels and the optimizer update."""

from __future__ import annotations

import pandas as pd

from perfcast.ops._batch import Batch
from perfcast.ops._table import COMM_FAMILIES
from perfcast.ops._transformer import step_ops
from perfcast.specs import ModelSpec, ParallelPlan, Precision

__all__ = ["training_ops"]

# Adam with fp32 master weights (Megatron mixed precision): per parameter it reads the master
# weight, both moments and the gradient and writes the three fp32 states plus the 16-bit copy.
ADAM_READ_BYTES_PER_PARAM = 4 + 4 + 4 + 4
ADAM_WRITE_BYTES_PER_PARAM = 4 + 4 + 4 + 2
ADAM_FLOPS_PER_PARAM = 12
# FlashAttention-2 backward: 5 matmuls against the forward's 2 (Dao 2023, section 3.2).
ATTENTION_BACKWARD_FLOP_RATIO = 2.5


def _backward(forward: pd.DataFrame) -> pd.DataFrame:
    """Backward kernels derived from each forward kernel."""
    rows = []
    for row in forward.to_dict("records"):
        fam = row["family"]
        if fam == "gemm":  # dgrad [m,n]x[n,k] and wgrad [k,m]x[m,n], each as costly as forward
            size = {"x": row["b"] * row["m"] * row["k"], "w": row["k"] * row["n"] * row["b"],
                    "y": row["b"] * row["m"] * row["n"]}
            per = row["bytes_written"] / size["y"]  # activation bytes per element
            w_per = (row["bytes_read"] - size["x"] * per) / size["w"]
            rows.append({**row, "op": row["op"] + "_dgrad", "m": row["m"], "n": row["k"],
                         "k": row["n"], "bytes_read": size["y"] * per + size["w"] * w_per,
                         "bytes_written": size["x"] * per})
            rows.append({**row, "op": row["op"] + "_wgrad", "m": row["k"], "n": row["n"],
                         "k": row["m"], "bytes_read": (size["y"] + size["x"]) * per,
                         "bytes_written": size["w"] * per})
        elif fam in ("attn_prefill", "attn_decode"):
            rows.append({**row, "op": row["op"] + "_bwd",
                         "flops": row["flops"] * ATTENTION_BACKWARD_FLOP_RATIO,
                         "bytes_read": 2 * row["bytes_read"] + row["bytes_written"],
                         "bytes_written": row["bytes_read"]})
        elif fam in COMM_FAMILIES:
            rows.append({**row, "op": row["op"] + "_bwd"})
        elif fam not in ("sampling", "kv_write"):
            rows.append({**row, "op": row["op"] + "_bwd",
                         "bytes_read": row["bytes_read"] + row["bytes_written"],
                         "bytes_written": row["bytes_read"]})
    out = pd.DataFrame(rows, columns=forward.columns)
    out["phase"] = "backward"
    return out


def training_ops(model: ModelSpec, batch_size: int, seq_len: int,
                 precision: Precision | None = None, plan: ParallelPlan | None = None,
                 local_params: float | None = None) -> pd.DataFrame:
    """Forward + backward + optimizer kernels of one micro-batch step on one GPU.

    `local_params` is the parameter count this GPU updates (default: all / (tp * pp)).
    """
    plan = plan or ParallelPlan()
    forward = step_ops(model, Batch.prefill(batch_size, seq_len), precision, plan,
                       phase="forward", all_logits=True)
    forward = forward[forward["family"] != "kv_write"]
    params = local_params if local_params is not None else model.total_params() / (
        plan.tp * plan.pp)
    opt = pd.DataFrame([{
        "layer": "optimizer", "op": "adam", "family": "elementwise", "phase": "optimizer",
        "b": 1, "m": params, "n": 1.0, "k": 0.0, "flops": ADAM_FLOPS_PER_PARAM * params,
        "bytes_read": ADAM_READ_BYTES_PER_PARAM * params,
        "bytes_written": ADAM_WRITE_BYTES_PER_PARAM * params, "dtype": "fp32", "count": 1}])
    return pd.concat([forward, _backward(forward), opt], ignore_index=True)
