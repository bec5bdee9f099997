"""Speed of the collective model: `pytest benchmarks/bench_collectives.py --benchmark-only -n 0`
(given by path: the file name keeps it out of the default collection).

Target: 10^5 mixed collective rows (all six kinds, groups 2..16,384 over a multi-node
cluster) priced by NcclModel in < 50 ms, so the training layer can price whole sweeps.
"""

import numpy as np
import pytest

from perfcast.comm import COLLECTIVES, NcclModel
from perfcast.specs import get_cluster


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(0)
    n = 100_000
    kind = rng.choice(np.array(COLLECTIVES, dtype=object), n)
    groups = rng.choice([2, 4, 8, 16, 64, 512, 2048, 16384], n).astype(float)
    return kind, 10 ** rng.uniform(2, 10, n), groups, get_cluster("dgx-h100", 16384)


def test_price_1e5_collectives(benchmark, rows):
    times = benchmark(NcclModel().collective_times, *rows)
    assert np.isfinite(times).all()
    if benchmark.stats is not None:  # None under --benchmark-disable
        assert benchmark.stats["min"] < 0.05
