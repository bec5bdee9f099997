"""Training step ops: the forward table, its backward kernels and the optimizer update.

Optional variants (all off by default): Megatron sequence parallelism (`plan.sp`), context
parallelism (`plan.cp`), LoRA adapters on a frozen base (`lora_rank`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.ops._batch import Batch
from perfcast.ops._table import COLUMNS, COMM_FAMILIES
from perfcast.ops._transformer import step_ops
from perfcast.specs import ModelSpec, ParallelPlan, Precision, bytes_per_element

__all__ = ["adam_rows", "lora_adapters", "lora_params", "training_ops"]

# Adam with fp32 master weights (Megatron mixed precision): per parameter it reads the master
# weight, both moments and the gradient and writes the three fp32 states plus the 16-bit copy.
ADAM_READ_BYTES_PER_PARAM = 4 + 4 + 4 + 4
ADAM_WRITE_BYTES_PER_PARAM = 4 + 4 + 4 + 2
ADAM_FLOPS_PER_PARAM = 12
# FlashAttention-2 backward: 5 matmuls against the forward's 2 (Dao 2023, section 3.2).
ATTENTION_BACKWARD_FLOP_RATIO = 2.5
_LAYERS = ("layer", "moe_layer")
# Row-parallel (Megatron) projections: input split over TP; the others are column-parallel.
_ROW_PARALLEL = ("o_proj", "mlp_down_proj")


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


def _sequence_parallel(forward: pd.DataFrame, tp: int) -> pd.DataFrame:
    """Megatron SP (Korthikanti et al. 2022, section 4.2.2): norms and residual adds run on
    1/tp of the sequence, and each TP all-reduce becomes a reduce-scatter plus an all-gather
    of the same full-size message."""
    rows = []
    for row in forward.to_dict("records"):
        if row["family"] in ("norm", "elementwise") and row["layer"] in (*_LAYERS, "head"):
            rows.append({**row, "m": row["m"] / tp, "flops": row["flops"] / tp,
                         "bytes_read": row["bytes_read"] / tp,
                         "bytes_written": row["bytes_written"] / tp})
        elif row["family"] == "allreduce":
            for kind in ("reducescatter", "allgather"):
                rows.append({**row, "family": kind, "op": row["op"].replace("allreduce", kind)})
        else:
            rows.append(row)
    return pd.DataFrame(rows, columns=forward.columns)


def lora_adapters(model: ModelSpec) -> dict[str, list[tuple[int, int]]]:
    """(in, out) of each LoRA adapter per fused projection of one dense layer: q, k, v, o and
    the MLP's gate/up and down (PEFT's "all linear layers"; routed experts get none)."""
    h, inter = model.hidden_size, model.intermediate_size
    return {"qkv_proj": [(h, model.q_dim), (h, model.kv_dim), (h, model.kv_dim)],
            "o_proj": [(model.attn_out_dim, h)],
            "mlp_up_proj": [(h, inter)] * (2 if model.gated_mlp else 1),
            "mlp_down_proj": [(inter, h)]}


def _lora(forward: pd.DataFrame, model: ModelSpec, rank: int, tp: int,
          precision: Precision) -> pd.DataFrame:
    """Adapter GEMMs after each adapted projection: x A ([in, r]) then (x A) B ([r, out]).
    Column-parallel projections split B's outputs over TP, row-parallel ones A's inputs."""
    adapters = lora_adapters(model)
    a_b, v_b = bytes_per_element(precision.activations), bytes_per_element(precision.vector_math)
    rows = []
    for row in forward.to_dict("records"):
        rows.append(row)
        base = row["op"].split(":")[0]
        if row["family"] != "gemm" or row["layer"] not in _LAYERS or base not in adapters:
            continue
        pairs, tokens = adapters[base], row["m"] * row["b"]
        row_parallel = base in _ROW_PARALLEL
        k_in = pairs[0][0] / (tp if row_parallel else 1)
        n_out = sum(o for _, o in pairs) / (1 if row_parallel else tp)
        for op, n, k in ((f"{base}_lora_a", rank * len(pairs), k_in),
                         (f"{base}_lora_b", n_out, rank)):
            rows.append({**row, "op": op, "b": 1, "m": tokens, "n": n, "k": k,
                         "flops": 2.0 * tokens * n * k, "dtype": precision.vector_math.value,
                         "bytes_read": tokens * k * a_b + n * k * v_b,
                         "bytes_written": tokens * n * v_b})
    return pd.DataFrame(rows, columns=forward.columns)


def lora_params(model: ModelSpec, rank: int) -> int:
    """Trainable adapter parameters of the whole model: r x (in + out) per adapter; MoE
    layers adapt their attention projections only."""
    per = {op: sum(rank * (i + o) for i, o in pairs)
           for op, pairs in lora_adapters(model).items()}
    attention = per["qkv_proj"] + per["o_proj"]
    dense_layers = model.num_layers - model.num_moe_layers
    return dense_layers * sum(per.values()) + model.num_moe_layers * attention


def _frozen(backward: pd.DataFrame) -> pd.DataFrame:
    """A frozen base computes no weight gradients (only adapters do) and no embedding grads."""
    op = backward["op"].to_numpy(dtype=object)
    keep = [not (str(o).endswith("_wgrad") and "_lora_" not in str(o)) for o in op]
    keep = pd.Series(keep, index=backward.index) & (backward["layer"] != "embedding")
    return backward[keep]


def _batch(plan: ParallelPlan, batch_size: int, seq_len: int) -> Batch:
    """Tokens one GPU runs: with context parallelism, seq_len / cp per sequence. Megatron CP
    gives each rank two mirrored chunks of 2cp, so every rank attends as many query-key pairs
    as a chunk of seq_len / cp after (cp - 1) / (2 cp) of the sequence (s^2 / (2 cp) pairs)."""
    if plan.cp == 1:
        return Batch.prefill(batch_size, seq_len)
    if seq_len % (2 * plan.cp):
        raise InputError("seq_len", f"{seq_len} does not split into 2 x cp = {2 * plan.cp} "
                         "chunks", f"a multiple of {2 * plan.cp}")
    chunk = seq_len // plan.cp
    return Batch(prefill_tokens=(chunk,) * batch_size,
                 prefill_context=(seq_len * (plan.cp - 1) // (2 * plan.cp),) * batch_size)


def training_ops(model: ModelSpec, batch_size: int, seq_len: int,
                 precision: Precision | None = None, plan: ParallelPlan | None = None,
                 local_params: float | None = None, *, lora_rank: int | None = None,
                 optimizer: bool = True) -> pd.DataFrame:
    """Forward + backward + optimizer kernels of one micro-batch step on one GPU.

    `local_params` is the parameter count this GPU updates (default: all / (tp * pp), or the
    LoRA adapters' when `lora_rank` is set). `plan.sp` and `plan.cp` apply sequence and
    context parallelism; `optimizer=False` leaves the Adam row out.
    """
    plan = plan or ParallelPlan()
    precision = precision or Precision()
    if lora_rank is not None and lora_rank < 1:
        raise InputError("lora_rank", f"must be >= 1, got {lora_rank}", ">= 1")
    forward = step_ops(model, _batch(plan, batch_size, seq_len), precision, plan,
                       phase="forward", all_logits=True)
    forward = forward[forward["family"] != "kv_write"]
    if plan.sp:
        forward = _sequence_parallel(forward, plan.tp)
    if lora_rank:
        forward = _lora(forward, model, lora_rank, plan.tp, precision)
    backward = _backward(forward)
    parts = [forward, _frozen(backward) if lora_rank else backward]
    if optimizer:
        parts.append(adam_rows([_local_params(model, plan, local_params, lora_rank)]))
    return pd.concat(parts, ignore_index=True)


def _local_params(model: ModelSpec, plan: ParallelPlan, local_params: float | None,
                  lora_rank: int | None) -> float:
    if local_params is not None:
        return local_params
    if lora_rank:
        return lora_params(model, lora_rank) / (plan.tp * plan.pp)
    return model.total_params() / (plan.tp * plan.pp)


def adam_rows(params: Sequence[float], read_bytes: float = ADAM_READ_BYTES_PER_PARAM,
              write_bytes: float = ADAM_WRITE_BYTES_PER_PARAM) -> pd.DataFrame:
    """One Adam update row per entry of `params` (parameters updated by one GPU), reading and
    writing the given bytes per parameter (default: fp32 master, main grad and moments)."""
    p = np.asarray(params, dtype=float)
    return pd.DataFrame({
        "layer": "optimizer", "op": "adam", "family": "elementwise", "phase": "optimizer",
        "b": np.ones(len(p), dtype=np.int64), "m": p, "n": 1.0, "k": 0.0,
        "flops": ADAM_FLOPS_PER_PARAM * p, "bytes_read": read_bytes * p,
        "bytes_written": write_bytes * p, "dtype": "fp32",
        "count": np.ones(len(p), dtype=np.int64)}, columns=COLUMNS)
