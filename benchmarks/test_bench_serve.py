"""Speed of the serving simulator (issue 5). Run: `pytest benchmarks/test_bench_serve.py
--benchmark-only -s`.

Workload: Llama-2-7B on one A100-80GB, arXiv-summarisation lengths (prompt + output <= 4096),
Poisson arrivals, 10,000 requests, vLLM v0 and Sarathi-512, at QPS 1.5 (below saturation)
and QPS 4 (overload). Vidur 0.0.26, measured side by side on the same 2-core machine, does
219 requests per wall-second below saturation (QPS 1.5, its ~6.4 s start-up included) and,
saturated (QPS 4), 397 req/s with vLLM v0 and 476 req/s with Sarathi. The target is >= 30x
the matching Vidur number, start-up included: >= ~6,600 req/s at QPS 1.5, >= ~11,900 (vLLM
v0) and >= ~14,300 (Sarathi) at QPS 4. Each case prints requests/s, the ratio to Vidur and
whether it reaches 30x, and simulated seconds per wall second, cold (a fresh `python` process
timing `step_model_for` + `simulate`, so building the step model and pricing its grid cells
count) and warm (the step model's grid already priced). `test_time_grows_linearly_with_requests`
runs 10^3 -> 10^6 requests (vLLM v0, QPS 1.5, warm) and checks time per request stays flat.
"""

import json
import subprocess
import sys
import time

import pytest

from perfcast.serve import ServeConfig, make_workload, simulate, step_model_for

N = 10_000
CASES = [("vllm-v0", 1.5), ("vllm-v0", 4.0), ("sarathi", 1.5), ("sarathi", 4.0)]
# Vidur 0.0.26 requests per wall-second on this machine, per (scheduler, QPS): below
# saturation start-up included; saturated, per scheduler.
VIDUR_REQ_S = {("vllm-v0", 1.5): 219.0, ("sarathi", 1.5): 219.0,
               ("vllm-v0", 4.0): 397.0, ("sarathi", 4.0): 476.0}
TARGET_RATIO = 30.0

_COLD = """
import json, sys, time
from perfcast.serve import ServeConfig, make_workload, simulate, step_model_for
scheduler, qps, n = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
config = ServeConfig(model="llama-2-7b", gpu="a100-sxm4-80gb", scheduler=scheduler,
                     chunk_size=512 if scheduler == "sarathi" else None,
                     max_batch=128 if scheduler == "sarathi" else 256)
w = make_workload(n, qps=qps, lengths="trace", trace="arxiv", max_tokens=4096, seed=0)
start = time.perf_counter()
s = simulate(config, w, step_model=step_model_for(config)).summary()
print(json.dumps({"wall_s": time.perf_counter() - start, "duration_s": s["duration_s"],
                  "steps": s["steps"]}))
"""


def _config(scheduler):
    return ServeConfig(model="llama-2-7b", gpu="a100-sxm4-80gb", scheduler=scheduler,
                       chunk_size=512 if scheduler == "sarathi" else None,
                       max_batch=128 if scheduler == "sarathi" else 256)


def _workload(n, qps, seed=0):
    return make_workload(n, qps=qps, lengths="trace", trace="arxiv", max_tokens=4096, seed=seed)


def _cold(scheduler, qps, n=N) -> dict:
    """`step_model_for` + `simulate` timed in a fresh interpreter (imports not timed)."""
    out = subprocess.run([sys.executable, "-c", _COLD, scheduler, str(qps), str(n)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _line(label, n, wall_s, duration_s, steps, scheduler, qps):
    vidur = VIDUR_REQ_S[(scheduler, qps)]
    ratio = n / wall_s / vidur
    verdict = "meets" if ratio >= TARGET_RATIO else "BELOW"
    return (f"{label}: {n} requests in {wall_s:.3f} s -> {n / wall_s:,.0f} req/s = "
            f"{ratio:.1f}x Vidur's {vidur:.0f} req/s ({verdict} the {TARGET_RATIO:.0f}x "
            f"target), {duration_s / wall_s:,.0f} simulated s per wall s ({steps} steps)")


@pytest.mark.parametrize(("scheduler", "qps"), CASES)
def test_speed_10k_arxiv(benchmark, scheduler, qps):
    colds = [_cold(scheduler, qps) for _ in range(3)]  # the machine is noisy: best of 3
    cold = min(colds, key=lambda c: c["wall_s"])
    print("\n" + _line(f"{scheduler} qps={qps} cold", N, cold["wall_s"], cold["duration_s"],
                       cold["steps"], scheduler, qps))
    config, w = _config(scheduler), _workload(N, qps)
    model = step_model_for(config)
    simulate(config, w, step_model=model)  # price the grid cells this workload touches
    result = benchmark.pedantic(lambda: simulate(config, w, step_model=model), rounds=3,
                                iterations=1)
    warm = benchmark.stats.stats.min
    s = result.summary()
    print(_line(f"{scheduler} qps={qps} warm", N, warm, s["duration_s"], s["steps"], scheduler,
                qps))
    assert s["steps"] == cold["steps"] and s["duration_s"] == cold["duration_s"]
    benchmark.extra_info.update({
        "cold_requests_per_s": N / cold["wall_s"], "warm_requests_per_s": N / warm,
        "cold_x_vidur": N / cold["wall_s"] / VIDUR_REQ_S[(scheduler, qps)],
        "cold_sim_s_per_wall_s": cold["duration_s"] / cold["wall_s"],
        "warm_sim_s_per_wall_s": s["duration_s"] / warm})


def test_time_grows_linearly_with_requests(benchmark):
    config = _config("vllm-v0")
    model = step_model_for(config)
    simulate(config, _workload(20_000, 1.5, seed=1), step_model=model)  # price the grid
    walls = {}
    for n in (1_000, 10_000, 100_000, 1_000_000):
        w = _workload(n, 1.5)
        start = time.perf_counter()
        s = simulate(config, w, step_model=model).summary()
        walls[n] = time.perf_counter() - start
        print(f"\n{n:>9} requests: {walls[n]:7.2f} s ({n / walls[n]:,.0f} req/s, "
              f"{walls[n] / n * 1e6:.0f} us per request, "
              f"{s['duration_s'] / walls[n]:,.0f} simulated s per wall s)")
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info["wall_s"] = walls
    per_request = {n: t / n for n, t in walls.items()}
    assert per_request[1_000_000] < 2.0 * per_request[10_000]  # linear, with slack for noise
    assert per_request[100_000] < 2.0 * per_request[10_000]
