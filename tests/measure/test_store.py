"""The shipped kernel-measurement store: schema, provenance, units and FLOP conventions."""

from importlib import resources

import numpy as np
import pandas as pd
import pytest

from perfcast.measure._schema import STORE_COLUMNS, TIMING_METHODS
from perfcast.measure._store import load_store, query, to_ops
from perfcast.ops import COLUMNS, attended_keys
from perfcast.specs import device_names

EXPECTED_FAMILIES = {
    "aiconfigurator": {"gemm", "attn_prefill", "attn_decode", "moe", "allreduce", "allgather",
                       "reducescatter", "alltoall"},
    "neusight": {"gemm", "conv", "elementwise", "activation", "softmax", "norm"},
    "vidur": {"gemm", "norm", "activation", "rope", "elementwise", "embedding", "attn_prefill",
              "attn_decode", "allreduce", "sendrecv"},
    "llmcompass": {"gemm", "softmax", "norm", "activation"},
}
TIMING = {"aiconfigurator": {"cuda_graph"}, "neusight": {"eager"}, "vidur": {"kineto"},
          "llmcompass": {"sync_wallclock"}}


@pytest.fixture(scope="module")
def store() -> pd.DataFrame:
    return load_store()


def one(store: pd.DataFrame, **where) -> pd.Series:
    mask = np.ones(len(store), dtype=bool)
    for col, value in where.items():
        mask &= (store[col] == value).to_numpy(dtype=bool)
    rows = store[mask]
    assert len(rows) == 1, f"{where}: {len(rows)} rows"
    return rows.iloc[0]


def test_schema_and_dtypes(store):
    assert list(store.columns) == list(STORE_COLUMNS)
    for col, dtype in STORE_COLUMNS.items():
        assert store[col].dtype == pd.Series([], dtype=dtype).dtype, col
    assert set(store["timing"].unique()) <= set(TIMING_METHODS)


def test_devices_are_catalog_devices(store):
    assert set(store["device"].unique()) <= set(device_names())


def test_sources_families_and_timing(store):
    fams = store.groupby("source", observed=True)["family"].unique()
    assert set(fams.index) == set(EXPECTED_FAMILIES)
    for source, expected in EXPECTED_FAMILIES.items():
        assert set(fams[source]) == expected, source
        assert set(store.loc[store["source"] == source, "timing"].unique()) == TIMING[source]


def test_values_positive_and_finite(store):
    for col in ("latency_s", "bytes", "m", "n", "b"):
        values = store[col].to_numpy(float)
        assert np.isfinite(values).all() and (values > 0).all(), col
    flops = store["flops"].to_numpy(float)
    assert np.isfinite(flops).all() and (flops >= 0).all()
    assert (store.loc[store["family"].isin(["gemm", "conv", "moe"]), "flops"] > 0).all()


def test_no_duplicate_measurements(store):
    keys = [c for c in STORE_COLUMNS if c not in ("latency_s", "source_file")]
    assert not pd.util.hash_pandas_object(store[keys], index=False).duplicated().any()


def test_units_one_known_row_per_source(store):
    # AIConfigurator h100_sxm gemm_perf: bfloat16 32768 x 51200 x 51200 -> 243.814819 ms
    row = one(store, source="aiconfigurator", device="h100-sxm", family="gemm", op="gemm",
              dtype="bf16", m=32768.0, n=51200.0, k=51200.0)
    assert row["latency_s"] == pytest.approx(0.243814819)
    assert row["bytes"] == 32768 * 51200 * 2 + 51200 * 51200 * 2 + 32768 * 51200 * 2
    # NeuSight test/bmm: H100 bmm B=1280, M=2048, N=2048 (reduced), K=256 -> 50.218634 ms
    row = one(store, source="neusight", device="h100-sxm", op="bmm", dtype="fp32", b=1280.0,
              m=2048.0, n=256.0, k=2048.0)
    assert row["latency_s"] == pytest.approx(0.050218634)
    assert row["split"] == "test"
    assert row["flops"] == 2 * 1280 * 2048 * 2048 * 256
    # Vidur a100 Llama-2-7B TP1, 4096 tokens, mlp_up_proj: two rows 3.3655 / 3.324 ms -> median
    row = one(store, source="vidur", device="a100-sxm4-80gb", op="mlp_up_proj", m=4096.0,
              n=22016.0, k=4096.0)
    assert row["latency_s"] == pytest.approx((3.3655 + 3.324) / 2 / 1e3)
    # LLMCompass matmul_A100.csv row 1: 64 x 12288 x 12288 -> 0.19 ms (tidy file in seconds)
    row = one(store, source="llmcompass", device="a100-sxm4-80gb", op="matmul", m=64.0,
              n=12288.0, k=12288.0)
    assert row["latency_s"] == pytest.approx(0.00019)


def test_flop_formulas(store):
    # masks and numpy columns: filtering the whole frame copies ten string columns
    col = {c: store[c].to_numpy(float) for c, t in STORE_COLUMNS.items() if t == "float64"}

    def where(family, op=None):
        mask = (store["family"] == family).to_numpy(bool)
        if op is not None:
            mask &= (store["op"] == op).to_numpy(bool)
        return {c: v[mask] for c, v in col.items()}

    for family in ("gemm", "conv"):
        g = where(family)
        np.testing.assert_allclose(g["flops"], 2 * g["b"] * g["m"] * g["n"] * g["k"], rtol=1e-9)
    moe_mask = (store["family"] == "moe").to_numpy(bool)
    moe = {c: v[moe_mask] for c, v in col.items()}
    mats = np.where(store.loc[moe_mask, "op"].str.contains("nongated").to_numpy(bool), 2.0, 3.0)
    # gated: n = 2 * inter (gate + up), plus the down projection -> 3 matrices of hidden x inter
    np.testing.assert_allclose(
        moe["flops"], 2 * moe["b"] * moe["m"] * moe["k"] * moe["n"] / (mats - 1) * mats,
        rtol=1e-9)
    dec = where("attn_decode", "attn")
    np.testing.assert_allclose(dec["flops"], 4 * dec["b"] * dec["n"] * dec["k"], rtol=1e-9)
    pre = where("attn_prefill", "attn")
    q, win = pre["q_len"], pre["window"]
    ctx, pairs = pre["kv_len"] - q, np.empty(len(q))
    for w in np.unique(win):
        sel = win == w
        pairs[sel] = attended_keys(q[sel], ctx[sel], int(w) or None)
    np.testing.assert_allclose(pre["flops"], 4 * pre["b"] * pre["k"] * pairs, rtol=1e-9)
    for family in ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv"):
        c = where(family)
        assert (c["flops"] == 0).all() and (c["bytes"] == c["m"]).all()


def test_query_runs_duckdb_sql(store):
    n = query("select count(*) as n from kernels")["n"].iloc[0]
    assert n == len(store)
    small = store[store["source"] == "llmcompass"]
    out = query("select family, count(*) as n from kernels group by family order by family",
                small)
    assert out["n"].sum() == len(small)


def test_to_ops_rows(store):
    rows = store.loc[store["family"].drop_duplicates().index]  # one row per family
    ops = to_ops(rows)
    assert list(ops.columns) == COLUMNS
    assert (ops["layer"] == "bench").all() and (ops["phase"] == "bench").all()
    assert (ops["count"] == 1).all() and ops["b"].dtype == "int64" and (ops["b"] >= 1).all()
    np.testing.assert_array_equal(ops["bytes_read"], rows["bytes"])
    assert list(ops["family"]) == list(rows["family"])


def test_load_store_from_path(store, tmp_path):
    part = store[store["source"] == "llmcompass"].reset_index(drop=True)
    path = tmp_path / "part.parquet"
    part.to_parquet(path, index=False)
    pd.testing.assert_frame_equal(load_store(path), part)


def test_shipped_file_is_small():
    ref = resources.files("perfcast.measure").joinpath("data/kernels.parquet")
    with resources.as_file(ref) as path:
        assert path.stat().st_size < 25e6
