"""sample_per_group is its definition: the first rows of each group in a seeded shuffle of
the whole table, in shuffled order, labels kept; at most per_group rows a group."""

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.measure import sample_per_group

BY = ["device", "family", "dtype"]


def _definition(rows, per_group, seed):
    return rows.sample(frac=1.0, random_state=seed).groupby(
        BY, sort=True, observed=True).head(per_group)


@st.composite
def _tables(draw):
    n = draw(st.integers(0, 60))
    pick = lambda values: draw(st.lists(st.sampled_from(values), min_size=n, max_size=n))  # noqa: E731
    rows = pd.DataFrame({"device": pd.array(pick(["a100", "h100", "b200"]), dtype="string"),
                         "family": pick(["gemm", "moe"]), "dtype": pick(["bf16", "fp8"]),
                         "latency_s": np.arange(n, dtype=float)})
    labels = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))  # repeated labels
    return rows.set_axis(labels) if draw(st.booleans()) else rows


@settings(max_examples=60, deadline=None)
@given(_tables(), st.integers(1, 8), st.integers(0, 3))
def test_sample_is_the_definition(rows, per_group, seed):
    got = sample_per_group(rows, per_group, seed)
    pd.testing.assert_frame_equal(got, _definition(rows, per_group, seed), check_exact=True)
    assert (got.groupby(BY, observed=True).size() <= per_group).all()


def test_none_keeps_every_row():
    rows = pd.DataFrame({"device": ["a"], "family": ["gemm"], "dtype": ["bf16"]})
    assert sample_per_group(rows, None) is rows
