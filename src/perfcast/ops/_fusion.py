"""Fusion rules: which runs of eager kernels become one kernel, and the bytes they stop moving.

A run of consecutive kernels sharing a fusion tag (set where the graph is built) becomes one
kernel that reads the run's external inputs once and writes its final output once; the FLOPs
stay. The rules are the ones torch.compile-style and hand-fused kernels apply:
  act      GELU-tanh's eight kernels (or SiLU x up) -> one activation kernel
  softmax  scale, mask, softmax (and dropout) of the attention scores -> one softmax kernel
  add_ln   a residual add and the LayerNorm after it (post-LN, BERT) -> one norm kernel
  rms_*    RMSNorm's pow, mean, +eps, rsqrt, two muls -> one norm kernel
  rope_*   a rotary embedding's mul, rotate, mul, add -> one elementwise kernel
Bias adds are already in the GEMM epilogue (addmm) and stay there.
"""

from __future__ import annotations

__all__ = ["FUSION_RULES", "fuse_rows"]

# tag prefix -> (family, kernel, external input tensors, output tensors)
FUSION_RULES = {"act": ("activation", "gelu", 1, 1), "softmax": ("softmax", "softmax", 1, 1),
                "add_ln": ("norm", "ln", 2, 2), "rms": ("norm", "ln", 1, 1),
                "rope": ("elementwise", "mul", 1, 1)}


_ELEM_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0}


def _rule(tag: str) -> tuple[str, str, float, float]:
    return FUSION_RULES[tag.split("_", 1)[0] if tag.startswith(("rms_", "rope_")) else tag]


def _merge(run: list[dict]) -> dict:
    family, kernel, reads, writes = _rule(run[0]["fuse"])
    big = max(run, key=lambda r: r["m"] * r["n"])
    e = big["m"] * big["n"]
    # the fused kernel moves the run's dtype (a half-precision RMSNorm's fp32 intermediates
    # stay in registers); an unknown dtype: the widest row's bytes per element
    per = _ELEM_BYTES.get(big["dtype"]) or (big["bytes_written"] / e if big["bytes_written"]
                                            else 4.0)
    if any(":gate_mul" in r["op"] for r in run):
        reads += 1  # SiLU(gate) x up reads both projections
    if run[0]["phase"] == "backward":
        reads += 1  # the saved input and the incoming gradient
    if any(r["op"].startswith("dropout:") for r in run):
        writes += 0.25  # the dropout mask (1 byte per 4-byte element)
    return {**big, "op": f"{kernel}:fused_{run[0]['fuse']}", "family": family, "k": 0,
            "flops": sum(r["flops"] for r in run), "bytes_read": reads * e * per,
            "bytes_written": writes * e * per, "fuse": ""}


def fuse_rows(rows: list[dict]) -> list[dict]:
    """Rows with each maximal run of same-tag kernels (same layer, phase, count) merged."""
    out, run = [], []

    def key(r: dict) -> tuple:
        return (r.get("fuse", ""), r["layer"], r["phase"], r["count"])

    for row in rows + [None]:
        if run and (row is None or key(row) != key(run[0])):
            out.append(_merge(run) if len(run) > 1 else run[0])
            run = []
        if row is None:
            break
        if row.get("fuse"):
            run.append(row)
        else:
            out.append(row)
    return out
