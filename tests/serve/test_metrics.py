"""The inter-token-gap histogram: bounded memory, exact mean, percentiles within a bin."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.serve._metrics import BIN_BITS, FLUSH_VALUES, WeightedHistogram

GAPS = st.lists(st.tuples(st.floats(1e-5, 10.0), st.integers(1, 300)), min_size=1,
                max_size=200)


def _exact_percentile(values, weights, q):
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cum = np.cumsum(w) / w.sum()
    return v[min(np.searchsorted(cum, q), len(v) - 1)]


def _fill(pairs, split=1):
    """A histogram fed `pairs` as runs of one value, in `split` flushed parts."""
    h = WeightedHistogram()
    for part in np.array_split(np.arange(len(pairs)), split):
        for i in part:
            value, weight = pairs[i]
            h.add([value], weight)
        h.flush()
    return h


@settings(max_examples=60, deadline=None)
@given(GAPS)
def test_mean_is_exact_and_percentiles_fall_within_a_bin(pairs):
    values = np.array([v for v, _ in pairs])
    weights = np.array([w for _, w in pairs], dtype=float)
    binned, bin_weights = WeightedHistogram.merged([_fill(pairs)])
    assert np.all(np.diff(binned) > 0) and bin_weights.sum() == weights.sum()
    np.testing.assert_allclose(binned @ bin_weights / bin_weights.sum(),
                               values @ weights / weights.sum(), rtol=1e-12)
    for q in (0.5, 0.9, 0.99):
        exact = _exact_percentile(values, weights, q)
        got = _exact_percentile(binned, bin_weights, q)
        assert abs(got - exact) <= 2.0 ** -BIN_BITS * exact


@settings(max_examples=30, deadline=None)
@given(GAPS, st.integers(2, 5))
def test_flushing_in_parts_gives_the_same_bins(pairs, split):
    one, _ = WeightedHistogram.merged([_fill(pairs)])
    parts, weights = WeightedHistogram.merged([_fill(pairs, split)])
    np.testing.assert_allclose(parts, one, rtol=1e-12)
    assert weights.sum() == sum(w for _, w in pairs)


def test_memory_depends_on_distinct_values_not_on_their_number():
    h = WeightedHistogram()
    gaps = [0.02, 0.021, 0.05]  # a few step times repeated many times
    for i in range(10 * FLUSH_VALUES // 64):
        h.add(gaps * 21 + [0.3], 1 + i % 7)
        assert h.buffered < FLUSH_VALUES + 64
    h.single.extend([0.02] * 100)
    values, weights = WeightedHistogram.merged([h])
    assert len(values) == 4 and len(h.keys) == 4
    np.testing.assert_allclose(values, sorted(gaps + [0.3]), rtol=1e-9)  # summed rounding
