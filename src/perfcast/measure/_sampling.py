"""Deterministic subsampling of measurement tables."""

from __future__ import annotations

import pandas as pd

__all__ = ["sample_per_group"]


def sample_per_group(rows: pd.DataFrame, per_group: int | None, seed: int = 0,
                     by: tuple[str, ...] = ("device", "family", "dtype")) -> pd.DataFrame:
    """At most `per_group` rows per group, drawn with a fixed seed (all rows when None)."""
    if per_group is None:
        return rows
    shuffled = rows.sample(frac=1.0, random_state=seed)
    return shuffled.groupby(list(by), sort=True, observed=True).head(per_group)
