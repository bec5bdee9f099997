"""Measured Gated DeltaNet kernels (AIConfigurator `gdn_perf` tables) as perfcast op rows.

Each measured kernel becomes the row a forecast prices for it, built by `perfcast.ops.step_ops`
on a one-layer linear-attention model with the measured per-GPU heads (tp = 1): the chunked
scan over prefill tokens (`chunk_gated_delta_rule*`, context) is the `scan_prefill` row, the
decode state step (`fused_recurrent_gated_delta_rule*`, generation) the `state_decode` row
(family `linear_attn`), and the short causal conv (`causal_conv1d_fn` / `_update`) the
`conv1d` elementwise row. Store-schema rows (perfcast.measure) of these feed `fit_calibration`,
so the `linear_attn` family is fitted by the same physical model as every other family.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.ops import Batch, step_ops
from perfcast.specs import LinearMixerSpec, ModelSpec

__all__ = ["FORECAST_OP", "SHAPE", "gdn_op_rows", "gdn_store_rows"]

# Measured kernel (prefix of AIConfigurator's kernel_source) -> the forecast row it stands for.
FORECAST_OP = {"chunk_gated_delta_rule": "scan_prefill",
               "fused_recurrent_gated_delta_rule": "state_decode",
               "causal_conv1d": "conv1d"}
# The columns that fix one measured kernel's shape (heads are per GPU, after TP).
SHAPE = ("kernel_source", "phase", "batch_size", "seq_len", "d_model", "d_conv",
         "num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim")
_OP_COLUMNS = ("family", "op", "dtype", "b", "m", "n", "k", "flops", "bytes_read",
               "bytes_written")


def forecast_op(kernel_source: str) -> str:
    """The forecast row name of a measured kernel (longest matching prefix)."""
    for prefix, op in FORECAST_OP.items():
        if kernel_source.startswith(prefix):
            return op
    raise InputError("kernel_source", f"unknown GDN kernel {kernel_source!r}",
                     [p + "*" for p in FORECAST_OP])


def _one_layer(shape: pd.Series) -> ModelSpec:
    lin = LinearMixerSpec(kind="gated-deltanet", key_heads=int(shape.num_k_heads),
                          key_head_dim=int(shape.head_k_dim), value_heads=int(shape.num_v_heads),
                          value_head_dim=int(shape.head_v_dim), conv_kernel=int(shape.d_conv))
    return ModelSpec(name="gdn-kernel", hidden_size=int(shape.d_model), num_layers=1,
                     num_heads=1, num_kv_heads=1, head_dim=int(shape.head_k_dim),
                     intermediate_size=1, vocab_size=1, layer_mixers=("linear",),
                     layer_ffns=("none",), linear_mixer=lin)


def _row(shape: pd.Series) -> dict:
    seqs = int(shape.batch_size)
    batch = (Batch(prefill_tokens=(int(shape.seq_len),) * seqs) if shape.phase == "context"
             else Batch(decode_context=(int(shape.seq_len),) * seqs))
    ops = step_ops(_one_layer(shape), batch)
    row = ops[ops["op"] == forecast_op(str(shape.kernel_source))].iloc[0]
    return {c: row[c] for c in _OP_COLUMNS}


def gdn_op_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Op-table columns (family, op, dtype, b, m, n, k, flops, bytes_read, bytes_written) of
    each measured row of a gdn_perf-style table, in its order (one step_ops per shape)."""
    shapes = table[list(SHAPE)].drop_duplicates().reset_index(drop=True)
    built = pd.DataFrame([_row(s) for s in shapes.itertuples(index=False)])
    merged = table[list(SHAPE)].merge(pd.concat([shapes, built], axis=1), on=list(SHAPE),
                                      how="left", validate="many_to_one")
    return merged[list(_OP_COLUMNS)].set_index(table.index)


def gdn_store_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Measurement-store rows (perfcast.measure schema) of a gdn table with `device`,
    `source`, `source_file` and `latency_s` columns: what `fit_calibration` fits."""
    ops = gdn_op_rows(table)
    n = len(table)
    return pd.DataFrame({
        "source": table["source"].to_numpy(), "source_file": table["source_file"].to_numpy(),
        "split": "", "device": table["device"].to_numpy(),
        "family": ops["family"].to_numpy(), "op": ops["op"].to_numpy(),
        "dtype": ops["dtype"].to_numpy(), "weight_dtype": ops["dtype"].to_numpy(),
        "kv_dtype": ops["dtype"].to_numpy(), "b": ops["b"].to_numpy(dtype=float),
        "m": ops["m"].to_numpy(dtype=float), "n": ops["n"].to_numpy(dtype=float),
        "k": ops["k"].to_numpy(dtype=float), "batch": table["batch_size"].to_numpy(dtype=float),
        "heads": table["num_v_heads"].to_numpy(dtype=float),
        "kv_heads": table["num_k_heads"].to_numpy(dtype=float),
        "head_dim": table["head_v_dim"].to_numpy(dtype=float),
        "q_len": table["seq_len"].to_numpy(dtype=float), "kv_len": np.ones(n),
        "window": np.zeros(n), "flops": ops["flops"].to_numpy(dtype=float),
        "bytes": (ops["bytes_read"] + ops["bytes_written"]).to_numpy(dtype=float),
        "timing": "cuda_graph", "latency_s": table["latency_s"].to_numpy(dtype=float)})
