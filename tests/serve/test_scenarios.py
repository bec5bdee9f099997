"""SCENARIOS.md I2.1 as a smoke test, pipeline parallelism, and the result's outputs."""

import json

import numpy as np
import pytest

from perfcast.errors import InputError
from perfcast.serve import ServeConfig, make_workload, simulate

BASE = {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb"}


def test_i2_1_llama2_7b_a100_vllm_poisson_2qps(real_step_model):
    """Llama-2-7B, 1xA100-80GB, vLLM-style, Poisson QPS 2.0, 200 arXiv requests, seed 42."""
    w = make_workload(200, qps=2.0, lengths="trace", trace="arxiv", seed=42)
    s = simulate(ServeConfig(**BASE), w, seed=42, step_model=real_step_model).summary()
    assert s["num_requests"] == 200
    assert 0.05 < s["ttft_s"]["p50"] < 5.0  # a ~2.6k-token prefill is ~0.2 s on an A100
    assert 0.01 < s["tpot_s"]["mean"] < 0.15
    assert s["ttft_s"]["p50"] <= s["ttft_s"]["p99"] and s["e2e_s"]["p50"] <= s["e2e_s"]["p99"]
    assert 0.5 < s["throughput_req_s"] <= 2.2
    assert 0 < s["kv_utilisation_mean"] < 1 and 0 <= s["kv_fragmentation_mean"] < 0.05


def test_pipeline_parallel_replica_runs(real_step_model):
    w = make_workload(20, qps=5.0, lengths="fixed", prompt_tokens=512, output_tokens=32)
    one = simulate(ServeConfig(**BASE), w, step_model=real_step_model).summary()
    two = simulate(ServeConfig(**BASE, pp=2), w).summary()
    assert two["num_requests"] == 20 and two["kv_blocks"] > 2 * one["kv_blocks"]
    assert two["tpot_s"]["mean"] < 1.5 * one["tpot_s"]["mean"]


def test_outputs_timeline_trace_and_files(fake_step_model, tmp_path):
    w = make_workload(10, qps=10.0, lengths="fixed", prompt_tokens=100, output_tokens=20)
    res = simulate(ServeConfig(**BASE, replicas=2), w, step_model=fake_step_model,
                   timeline=True)
    frame = res.timelines[0]
    assert list(frame.columns) == ["time_s", "duration_s", "batch_size", "num_tokens",
                                   "kv_utilisation"]
    assert (np.diff(frame["time_s"]) > 0).all() and len(frame) == res.replicas["steps"][0]
    trace = res.chrome_trace()
    phases = {e["ph"] for e in trace["traceEvents"]}
    assert {"b", "e", "X", "M"} <= phases
    json.dumps(trace)
    path = res.to_csv(tmp_path / "r.csv")
    with pytest.raises(InputError):
        res.to_csv(path)
    res.to_parquet(tmp_path / "r.parquet")
    s = res.summary(ttft_slo_s=1.0, tpot_slo_s=0.1)
    assert s["goodput_req_s"] == pytest.approx(s["throughput_req_s"])
    assert res.goodput_req_s(0.0, 0.0) == 0.0
