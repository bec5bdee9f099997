"""Speed of the serving simulator (issue 5). Run: `pytest benchmarks/test_bench_serve.py
--benchmark-only -s`.

Workload: Llama-2-7B on one A100-80GB, arXiv-summarisation lengths (prompt + output <= 4096),
Poisson arrivals, 10,000 requests, vLLM v0 and Sarathi-512, at QPS 1.5 (below saturation)
and QPS 4 (overload). Vidur 0.0.26 does ~157 requests per wall-second below saturation and
~540 saturated on a 2-core machine (plus 5-7 s start-up); the target is >= 30x that, start-up
included. Each case prints requests/s and simulated seconds per wall second, for a cold
start (the step model built and its grid priced in the timed region) and warm.
"""

import time

import pytest

from perfcast.serve import ServeConfig, make_workload, simulate, step_model_for

N = 10_000
CASES = [("vllm-v0", 1.5), ("vllm-v0", 4.0), ("sarathi", 1.5), ("sarathi", 4.0)]


def _config(scheduler):
    return ServeConfig(model="llama-2-7b", gpu="a100-sxm4-80gb", scheduler=scheduler,
                       chunk_size=512 if scheduler == "sarathi" else None,
                       max_batch=128 if scheduler == "sarathi" else 256)


def _workload(n, qps, seed=0):
    return make_workload(n, qps=qps, lengths="trace", trace="arxiv", max_tokens=4096, seed=seed)


def _report(benchmark, label, n, wall_s, result):
    s = result.summary()
    line = (f"{label}: {n} requests in {wall_s:.2f} s -> {n / wall_s:,.0f} req/s, "
            f"{s['duration_s'] / wall_s:,.0f} simulated s per wall s ({s['steps']} steps)")
    print("\n" + line)
    benchmark.extra_info.update({"requests_per_s": n / wall_s,
                                 "sim_s_per_wall_s": s["duration_s"] / wall_s})


@pytest.mark.parametrize(("scheduler", "qps"), CASES)
def test_speed_10k_arxiv(benchmark, scheduler, qps):
    config, w = _config(scheduler), _workload(N, qps)

    def cold():
        return simulate(config, w, step_model=step_model_for(config))

    start = time.perf_counter()
    result = benchmark.pedantic(cold, rounds=1, iterations=1)
    _report(benchmark, f"{scheduler} qps={qps} cold", N, time.perf_counter() - start, result)
    model = step_model_for(config)
    simulate(config, _workload(1000, qps, seed=1), step_model=model)  # price the grid
    start = time.perf_counter()
    result = simulate(config, w, step_model=model)
    _report(benchmark, f"{scheduler} qps={qps} warm", N, time.perf_counter() - start, result)


def test_time_grows_linearly_with_requests(benchmark):
    config = _config("vllm-v0")
    model = step_model_for(config)
    simulate(config, _workload(2000, 1.5, seed=1), step_model=model)
    walls = {}
    for n in (1_000, 10_000, 100_000):
        w = _workload(n, 1.5)
        start = time.perf_counter()
        simulate(config, w, step_model=model)
        walls[n] = time.perf_counter() - start
        print(f"\n{n:>7} requests: {walls[n]:.2f} s ({n / walls[n]:,.0f} req/s)")
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info["wall_s"] = walls
    assert walls[100_000] / walls[10_000] < 15  # linear (10x requests) with slack
