"""Fusion-aware kernels of a CNN inference graph (nn-Meter's kernel detection, Zhang et al.
MobiSys 2021): deployment runtimes (TFLite, ONNX Runtime, oneDNN graphs, TensorRT) run
conv + batch-norm + ReLU as one kernel and a residual add + ReLU as another, so the kernel
times of the eager graph over-count their memory traffic.

In eval mode a batch norm is an affine per channel, folded into the conv's weights and bias
(no kernel left); a ReLU becomes the epilogue of the kernel before it (a conv, or the
residual add), written once. So every `bn` and `relu` row of a stage (`ops.cnn_ops` rows,
identical kernels merged with `count`) leaves the table; their FLOPs move into the stage's
convs (in proportion to each conv's output elements), so the graph's FLOPs are conserved and
only the bytes those kernels moved disappear. Training graphs keep their batch norms
(batch statistics cannot be folded): only forward-only tables are accepted.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfcast.errors import InputError

__all__ = ["fuse_cnn_kernels"]

_FOLDED = {("bn", "norm"), ("relu", "activation")}


def _folded(ops: pd.DataFrame) -> np.ndarray:
    keys = zip(ops["op"].to_numpy(dtype=object), ops["family"].to_numpy(dtype=object),
               strict=True)
    return np.array([k in _FOLDED for k in keys], dtype=bool)


def fuse_cnn_kernels(ops: pd.DataFrame) -> pd.DataFrame:
    """The CNN op table as a fusing runtime launches it (module docstring)."""
    if (ops["phase"] != "forward").any():
        raise InputError("ops", "fusion folds eval-mode batch norms: forward (inference) "
                         "tables only", "an ops.cnn_ops table")
    folded = _folded(ops)
    out = ops[~folded].copy()
    moved = (ops["flops"] * ops["count"])[folded].groupby(ops["layer"][folded]).sum()
    conv = out["family"] == "conv"
    if (moved.index.difference(out.loc[conv, "layer"].unique())).size:
        raise InputError("ops", "a stage has batch norms or ReLUs but no conv to fold them "
                         "into", "an ops.cnn_ops table")
    outputs = (out["m"] * out["n"] * out["count"]).where(conv, 0.0)
    share = outputs / outputs.groupby(out["layer"]).transform("sum").replace(0.0, np.nan)
    extra = out["layer"].map(moved).fillna(0.0) * share.fillna(0.0) / out["count"]
    out["flops"] = out["flops"] + extra.where(conv, 0.0)
    return out.reset_index(drop=True)
