"""The op table is the rows as given, shape and count columns typed."""

import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from perfcast.ops import COLUMNS, OpRows

_rows = st.lists(st.fixed_dictionaries({
    "layer": st.sampled_from(["attn", "mlp", ""]), "op": st.text(max_size=3),
    "family": st.sampled_from(["gemm", "norm", "allreduce"]),
    "phase": st.sampled_from(["prefill", "decode"]), "b": st.integers(1, 64),
    "m": st.one_of(st.integers(0, 10**6), st.floats(0, 1e6)),
    "n": st.floats(0, 1e6), "k": st.integers(0, 8192), "flops": st.floats(0, 1e15),
    "bytes_read": st.floats(0, 1e12), "bytes_written": st.floats(0, 1e12),
    "dtype": st.sampled_from(["bf16", "fp8"]), "count": st.integers(1, 80)}), max_size=20)


@given(_rows)
def test_frame_is_the_rows_with_typed_shape_columns(rows):
    """What `frame` returns is the per-row frame with b/count int64 and m/n/k float64."""
    table = OpRows([{c: r[c] for c in COLUMNS} for r in rows])
    want = pd.DataFrame(table.rows, columns=COLUMNS).astype(
        {"b": "int64", "count": "int64", "m": "float64", "n": "float64", "k": "float64"})
    pd.testing.assert_frame_equal(table.frame(), want, check_exact=True)


@given(st.lists(_rows, min_size=1, max_size=5))
def test_one_frame_of_joined_rows_is_the_concatenated_frames(parts):
    """Joining steps' rows and building one frame (the serving model's per-point MoE grid)
    gives the table concatenating each step's frame would: same values, dtypes and index."""
    tables = [OpRows([{c: r[c] for c in COLUMNS} for r in rows]) for rows in parts]
    joined = OpRows([r for t in tables for r in t.rows]).frame()
    frames = [t.frame() for t in tables]
    want = pd.concat([f for f in frames if len(f)] or frames[:1], ignore_index=True)
    pd.testing.assert_frame_equal(joined, want, check_exact=True)
