"""The residual grid's fit is its definition: per level, the shrunk mean of what coarser levels
left in each cell (pandas' groupby over the cells' string names), whatever the fast path."""

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from perfcast.kernels._residual import _LEVELS, ResidualGrid, _keys, _level_name


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
