"""Error statistics shared by the end-to-end validations (serving, training)."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["ape_summary"]


def ape_summary(res: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Mean, median and P90 of the `ape` column (absolute percentage errors, fractions) and
    the count, per group of `keys`."""
    return res.groupby(keys, sort=True)["ape"].agg(
        mape="mean", median_ape="median", p90_ape=lambda x: float(np.quantile(x, 0.9)),
        n="size").reset_index()
