"""The residual grid's fit is its definition: per level, the shrunk mean of what coarser levels
left in each cell (pandas' groupby over the cells' string names), whatever the fast path."""

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from perfcast.kernels._residual import (
    _LEVELS,
    NeighbourResidual,
    ResidualGrid,
    _keys,
    _level_name,
    nearest,
)


def _definition(bins, variants, residual, shrink_rows=5.0, min_rows=3) -> dict:
    """The cells by the definition, one string key per row (the fit before it was fast)."""
    cells, remaining = {}, np.asarray(residual, dtype=float).copy()
    for level in _LEVELS:
        keys = _keys(bins, variants, level)
        stats = pd.DataFrame({"key": keys, "r": remaining}).groupby("key")["r"].agg(
            ["sum", "count"])
        stats = stats[stats["count"] >= min_rows]
        table = (stats["sum"] / (stats["count"] + shrink_rows)).round(6)
        cells[_level_name(level)] = {k: float(v) for k, v in sorted(table.items())}
        remaining -= np.array([cells[_level_name(level)].get(k, 0.0) for k in keys])
    return cells


@given(st.integers(0, 2**32 - 1), st.integers(0, 400), st.integers(1, 4), st.integers(1, 9))
def test_fit_is_the_definition(seed, rows, n_variants, spread):
    rng = np.random.default_rng(seed)
    bins = np.clip(rng.integers(-spread, spread + 1, (rows, 4)) * rng.choice([1, 15], (rows, 4)),
                   -60, 60)
    variants = rng.choice([f"gemm/{d}" for d in ("bf16", "fp8", "fp32", "int4")][:n_variants],
                          rows).astype(object)
    residual = rng.normal(0.0, 0.3, rows)
    residual[rng.random(rows) < 0.02] = np.nan  # a row the model could not price
    grid = ResidualGrid.fit(bins, variants, residual)
    assert grid.cells == _definition(bins, variants, residual)
    assert list(grid.cells) == [_level_name(level) for level in _LEVELS]
    for table in grid.cells.values():
        assert list(table) == sorted(table)  # the JSON's order, as before


@given(st.integers(0, 2**32 - 1), st.integers(1, 300), st.booleans())
def test_correction_is_the_sum_of_each_level_s_cell(seed, rows, piped):
    """A grid's correction is, per row, the sum over levels of the value under the row's cell
    name (0 where none): the compiled integer tables read the string keys exactly, variant
    names with '|' included."""
    rng = np.random.default_rng(seed)
    bins = rng.integers(-3, 4, (rows, 4))
    names = ["gemm|fp8", "attn/bf16"] if piped else ["gemm/bf16", "attn/bf16"]
    variants = rng.choice(names, rows).astype(object)
    grid = ResidualGrid.fit(bins, variants, rng.normal(0.0, 0.3, rows), min_rows=1)
    query = rng.integers(-4, 5, (50, 4))
    query_variants = rng.choice([*names, "moe/fp4"], 50).astype(object)
    want = sum(np.array([grid.cells[_level_name(level)].get(k, 0.0)
                         for k in _keys(query, query_variants, level)]) for level in _LEVELS)
    np.testing.assert_allclose(grid.correction(query, query_variants), want, rtol=0,
                               atol=1e-12)


def _by_definition(pts, queries, k):
    """Each query's k nearest rows by (distance, index), one query at a time."""
    out_d, out_i = [], []
    for q in queries:
        d = np.sqrt(((pts - q) ** 2).sum(axis=1))
        order = sorted(range(len(pts)), key=lambda i: (d[i], i))[:k]
        out_d.append(d[order])
        out_i.append(order)
    return np.array(out_d).reshape(len(queries), k), np.array(out_i).reshape(len(queries), k)


@given(st.integers(0, 2**32 - 1), st.integers(1, 300), st.integers(0, 200),
       st.integers(1, 10), st.booleans())
def test_nearest_is_one_answer_with_or_without_a_tree(seed, n, q, k, lattice):
    """Direct distances and a KD-tree's candidates give the same neighbours in the same order,
    ties broken by index, as the definition — on lattice points, where ties are the rule."""
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(seed)
    draw = ((lambda m: rng.integers(0, 4, (m, 3)).astype(float)) if lattice
            else (lambda m: rng.normal(size=(m, 3))))
    pts, queries, k = draw(n), draw(q), min(k, n)
    want_d, want_i = _by_definition(pts, queries, k)
    for tree in (None, cKDTree(pts)):
        dist, idx = nearest(pts, queries, k, tree)
        assert dist.shape == idx.shape == (q, k)
        np.testing.assert_array_equal(idx, want_i)
        np.testing.assert_allclose(dist, want_d, rtol=0, atol=1e-12)


def test_neighbour_correction_is_the_same_for_small_and_large_batches(monkeypatch):
    """A batch priced directly and one priced through the KD-tree (forced by a zero direct
    limit) give bit-identical corrections."""
    import perfcast.kernels._residual as residual

    rng = np.random.default_rng(3)
    pts = np.column_stack([rng.integers(0, 12, (500, 3)), rng.normal(0, 0.2, 500)])
    near = NeighbourResidual(points={"gemm/bf16": pts.astype(float)})
    ops = pd.DataFrame({"b": 1, "m": 2.0 ** rng.integers(0, 14, 300),
                        "n": 2.0 ** rng.integers(0, 14, 300),
                        "k": 2.0 ** rng.integers(0, 14, 300), "family": "gemm"})
    keys = np.full(len(ops), "gemm/bf16", dtype=object)
    direct = near.correction(ops, keys)
    monkeypatch.setattr(residual, "_DIRECT_PAIRS", 0)
    treed = NeighbourResidual(points=near.points).correction(ops, keys)
    np.testing.assert_array_equal(direct, treed)
