"""Speed of the serving step model, the simulator's hot path. Run:
`pytest benchmarks/test_bench_serving_step.py --benchmark-only -n 0`.

Targets: 10^6 vectorised step queries well under 1 s; one `step_time_s` under 20 us; both
against direct pricing (step_time of step_ops), reported as a ratio in extra_info.
"""

import time

import numpy as np
import pytest

from perfcast.compose import BatchStats, ServingStepModel, host_overhead_s, step_time
from perfcast.kernels import PhysicsModel, shipped_calibration
from perfcast.ops import Batch, step_ops
from perfcast.specs import cluster_for, get_device, get_model

N_VECTOR, N_SINGLE = 1_000_000, 10_000


@pytest.fixture(scope="module")
def model():
    return ServingStepModel(get_model("llama-2-7b"), cluster_for(get_device("h100-sxm"), 1),
                            time_model=PhysicsModel(shipped_calibration()))


def _random_batches(n, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        npf = int(rng.integers(0, 3))
        pt = tuple(int(x) for x in rng.integers(1, 2048, npf))
        pc = tuple(int(x) for x in rng.integers(0, 8000, npf))
        dc = tuple(int(x) for x in rng.integers(1, 8000, int(rng.integers(0 if npf else 1, 128))))
        out.append((pt, pc, dc))
    return out


def _direct_s(model, batch_args):
    start = time.perf_counter()
    for pt, pc, dc in batch_args:
        b = Batch(prefill_tokens=pt, prefill_context=pc, decode_context=dc)
        step_time(step_ops(model.model, b), model.cluster, "cuda-graph",
                  host_overhead_s("vllm-v0", b.num_seqs, 1), model.time_model)
    return (time.perf_counter() - start) / len(batch_args)


@pytest.fixture(scope="module")
def million_stats(model):
    base = BatchStats.concat([BatchStats.of(Batch(prefill_tokens=pt, prefill_context=pc,
                                                  decode_context=dc))
                              for pt, pc, dc in _random_batches(2000)])
    idx = np.random.default_rng(1).integers(0, len(base), N_VECTOR)
    stats = BatchStats(*(getattr(base, f)[idx] for f in base.__dataclass_fields__))
    model.step_times_s(stats)  # price the grid cells these batches touch
    return stats


def test_million_vectorised_steps(benchmark, model, million_stats):
    out = benchmark.pedantic(model.step_times_s, args=(million_stats,), rounds=3, iterations=1)
    assert len(out) == N_VECTOR and np.all(out > 0)
    if benchmark.stats is None:  # --benchmark-disable: ran once, nothing timed
        return
    direct = _direct_s(model, _random_batches(20, seed=2))
    per_query = benchmark.stats.stats.mean / N_VECTOR
    benchmark.extra_info.update(direct_s_per_step=direct, per_query_s=per_query,
                                speedup_vs_direct=direct / per_query)
    assert benchmark.stats.stats.mean < 1.0


def test_single_step_calls(benchmark, model):
    batches = _random_batches(N_SINGLE, seed=3)
    for b in batches:  # warm the cells
        model.step_time_s(*b)

    def run():
        for b in batches:
            model.step_time_s(*b)

    benchmark.pedantic(run, rounds=3, iterations=1)
    if benchmark.stats is None:
        return
    per_call = benchmark.stats.stats.mean / N_SINGLE
    direct = _direct_s(model, batches[:20])
    benchmark.extra_info.update(per_call_s=per_call, direct_s_per_step=direct,
                                speedup_vs_direct=direct / per_call)
    assert per_call < 50e-6
