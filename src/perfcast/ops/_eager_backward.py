"""The kernels autograd launches for each eager forward kernel (PyTorch derivative rules).

Per forward kernel (name before ':'): a linear layer's dgrad and wgrad GEMMs and its bias
reduction; a bmm's two GEMMs; a binary multiply's two products; a residual add's gradient
accumulation; an activation's, softmax's or norm's backward kernel reading the saved input and
the incoming gradient. Adds of a scalar or of a mask pass the gradient through (no kernel).
A fused attention row (SDPA) gets the flash backward kernel.
"""

from __future__ import annotations

from perfcast.ops._table import COMM_FAMILIES

__all__ = ["backward_rows"]

# Kernels whose gradient is one kernel of the same name over the same shape, reading the
# saved tensor and the incoming gradient.
_SAME = ("mulu", "divu", "where", "maxu", "copy", "dropout", "tanh", "gelu", "relu", "silu",
         "softmax", "mean")
_PASS_THROUGH = ("addu",)


def _vec(row: dict, kernel: str, suffix: str, reads: float, writes: float) -> dict:
    e = row["m"] * row["n"]
    per = row["bytes_written"] / max(e, 1e-30) if row["bytes_written"] else 4.0
    return {**row, "op": f"{kernel}:{row['op'].split(':', 1)[-1]}.{suffix}",
            "bytes_read": reads * e * per, "bytes_written": writes * e * per}


def _linear(row: dict) -> list[dict]:
    t, out, inp = row["m"], row["n"], row["k"]
    per = row["bytes_written"] / (t * out)
    label = row["op"].split(":", 1)[-1]
    rows = [
        {**row, "op": f"linear:{label}.dgrad", "m": t, "n": inp, "k": out,
         "bytes_read": (t * out + out * inp) * per, "bytes_written": t * inp * per},
        {**row, "op": f"linear:{label}.wgrad", "m": out, "n": inp, "k": t,
         "bytes_read": (t * out + t * inp) * per, "bytes_written": out * inp * per}]
    if row.get("bias"):
        rows.append({**row, "op": f"sum:{label}.bias_grad", "family": "elementwise",
                     "b": 1, "k": 0, "flops": t * out, "bytes_read": t * out * per,
                     "bytes_written": out * per})
    return rows


def _bmm(row: dict) -> list[dict]:
    b, m, n, k = row["b"], row["m"], row["n"], row["k"]
    per = row["bytes_written"] / (b * m * n)
    label = row["op"].split(":", 1)[-1]
    return [
        {**row, "op": f"bmm:{label}.grad_a", "m": m, "n": k, "k": n,
         "bytes_read": b * (m * n + n * k) * per, "bytes_written": b * m * k * per},
        {**row, "op": f"bmm:{label}.grad_b", "m": k, "n": n, "k": m,
         "bytes_read": b * (m * k + m * n) * per, "bytes_written": b * k * n * per}]


def _flash_backward(row: dict) -> dict:
    """SDPA's flash backward: one kernel recomputing the scores, 2.5x the forward FLOPs (five
    matmuls to the forward's two: S, dP, dV, dQ, dK; Dao 2023, FlashAttention-2 sec. 3.1),
    reading Q, K, V, O and dO, writing dQ, dK, dV."""
    return {**row, "op": f"{row['op']}.grad", "flops": 2.5 * row["flops"],
            "bytes_read": row["bytes_read"] + 2 * row["bytes_written"],
            "bytes_written": row["bytes_read"]}


def _one(row: dict) -> list[dict]:
    kernel, label = row["op"].split(":", 1)
    fam = row["family"]
    if fam in COMM_FAMILIES:
        return [{**row, "op": f"{row['op']}.grad"}]
    if fam == "attn_prefill":
        return [_flash_backward(row)]
    if kernel == "linear":
        return _linear(row)
    if kernel == "bmm":
        return _bmm(row)
    if kernel in _PASS_THROUGH or (kernel == "add" and "residual" not in label):
        return []
    if kernel == "add":  # the residual branch point sums the two incoming gradients
        return [_vec(row, "add", "grad_sum", 2, 1)]
    if kernel == "mul":
        return [_vec(row, "mul", "grad_a", 2, 1), _vec(row, "mul", "grad_b", 2, 1)]
    if kernel == "powu":
        return [_vec(row, "powu", "grad", 1, 1), _vec(row, "mul", "grad", 2, 1)]
    if kernel == "rsqrt":
        return [_vec(row, "mul", "grad", 2, 1)]
    if kernel == "ln":  # input gradient, then the gamma/beta column reductions
        return [_vec(row, "ln", "grad", 2, 1),
                {**_vec(row, "sum", "weight_grad", 2, 0), "family": "elementwise"}]
    if kernel == "embedding":  # zero the table's gradient, then index-add the rows
        rows = [_vec(row, "add", "grad_index_add", 2, 1)]
        table = row.get("table_rows", 0)
        if table:
            rows.insert(0, {**_vec(row, "fill", "grad_zero", 0, table / row["m"]),
                            "family": "elementwise"})
        return rows
    if kernel in _SAME:
        return [_vec(row, kernel, "grad", 2, 1)]
    return [_vec(row, kernel, "grad", 2, 1)]


def backward_rows(forward: list[dict]) -> list[dict]:
    """Backward kernels in the order autograd runs them (the forward's reverse)."""
    out = []
    for row in reversed(forward):
        for r in _one(row):
            r["phase"] = "backward"
            out.append(r)
    return out
