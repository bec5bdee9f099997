"""SCENARIOS.md I2.2, I2.3, I3.1 and I3.2 answered by the serve engine (I2.1 is in
test_scenarios.py). Assertions are the physical relations each scenario is about."""

import pytest

from perfcast.serve import ServeConfig, make_workload, plan_memory, simulate


@pytest.fixture(scope="module")
def arxiv_100():
    return {qps: make_workload(100, qps=qps, lengths="trace", trace="arxiv", seed=42)
            for qps in (0.5, 2.0)}


def test_i2_2_sarathi_vs_vllm_on_13b(arxiv_100):
    """Llama-2-13B, 1xA100-80GB, Sarathi-Serve (chunk 512) vs vLLM over a QPS sweep: chunked
    prefills stop long prompts from stalling decodes, so Sarathi's TPOT tail is lower, and
    both saturate at the same throughput."""
    out = {}
    for qps, w in arxiv_100.items():
        for sched, extra in (("vllm-v0", {}), ("sarathi", {"chunk_size": 512})):
            cfg = ServeConfig(model="llama-2-13b", gpu="a100-sxm4-80gb", scheduler=sched, **extra)
            out[qps, sched] = simulate(cfg, w, seed=42).summary()
    for qps in arxiv_100:
        assert out[qps, "sarathi"]["tpot_s"]["p99"] < out[qps, "vllm-v0"]["tpot_s"]["p99"]
        assert out[qps, "sarathi"]["throughput_req_s"] == pytest.approx(
            out[qps, "vllm-v0"]["throughput_req_s"], rel=0.1)
    assert out[2.0, "vllm-v0"]["ttft_s"]["p50"] > 5 * out[0.5, "vllm-v0"]["ttft_s"]["p50"]


def test_i2_3_llama2_70b_four_tp8_replicas_on_32_h100():
    w = make_workload(200, qps=8.0, lengths="trace", trace="arxiv", seed=42)
    cfg = ServeConfig(model="llama-2-70b", cluster="dgx-h100", tp=8, replicas=4,
                      scheduler="sarathi", chunk_size=512)
    s = simulate(cfg, w, seed=42).summary()
    assert s["num_requests"] == 200 and s["preemptions"] == 0
    assert s["ttft_s"]["p99"] < 2.0  # 32 H100s are far from saturated at 8 QPS
    assert 0.01 < s["tpot_s"]["p50"] < 0.05


def test_i3_1_kv_blocks_concurrency_and_throughput_vs_batch():
    """Llama-2-7B on 1xA100-40GB with 4K-token contexts: blocks available, the most
    sequences that fit, and throughput rising with batch until the cache is full."""
    cfg = ServeConfig(model="llama-2-7b", gpu="a100-sxm4-40gb")
    plan = plan_memory(cfg)
    max_seqs = plan.blocks * cfg.block_size // 4096
    assert 2000 < plan.blocks < 3500 and 8 <= max_seqs <= 12
    tput = {}
    for c in (1, 4, 16):
        w = make_workload(2 * c, arrival="closed_loop", concurrency=c, lengths="fixed",
                          prompt_tokens=3584, output_tokens=512)
        tput[c] = simulate(cfg, w).summary()
    assert tput[1]["throughput_tok_s"] < tput[4]["throughput_tok_s"] < tput[16][
        "throughput_tok_s"]
    assert tput[4]["preemptions"] == 0 and tput[16]["preemptions"] > 0  # past max_seqs


def test_i3_2_block_size_and_preemption_mode_near_exhaustion():
    """Llama-2-13B on 1xA100-40GB at high QPS: the cache runs out, sequences are preempted;
    swap keeps their KV (no restarts), recompute restarts them; larger blocks waste more."""
    w = make_workload(150, qps=6.0, lengths="trace", trace="arxiv", seed=1)
    res = {(bs, mode): simulate(ServeConfig(model="llama-2-13b", gpu="a100-sxm4-40gb",
                                            block_size=bs, preemption=mode), w).summary()
           for bs in (16, 32) for mode in ("recompute", "swap")}
    for bs in (16, 32):
        assert res[bs, "recompute"]["preemptions"] > 0
        assert res[bs, "recompute"]["restarts"] == res[bs, "recompute"]["preemptions"]
        assert res[bs, "swap"]["restarts"] == 0
    assert res[32, "recompute"]["kv_fragmentation_mean"] > res[16, "recompute"][
        "kv_fragmentation_mean"]
    for s in res.values():
        assert 0.5 < s["kv_utilisation_mean"] <= 1.0
