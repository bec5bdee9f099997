"""Scenarios I5.1, I5.2 and I5.4 of SCENARIOS.md, each answered through the public API and
checked against the physical relation it is about."""

import pytest

from perfcast.ops import kv_bytes_per_token
from perfcast.serve import (
    ServeConfig,
    make_workload,
    simulate,
    simulate_disaggregated,
    step_model_for,
)
from perfcast.specs import ParallelPlan


@pytest.fixture(scope="module")
def i51_results():
    w = make_workload(60, qps=0.5, lengths="fixed", prompt_tokens=512, output_tokens=256)
    base = {"model": "llama-2-70b", "gpu": "h100-sxm", "tp": 4, "scheduler": "vllm-v1"}
    plain = simulate(ServeConfig(**base), w).summary()
    spec = {a: simulate(ServeConfig(**base, spec_k=4, spec_draft_model="llama-2-7b",
                                    spec_acceptance=a), w).summary() for a in (0.6, 0.85)}
    return plain, spec


def test_i51_speculative_decoding_speedup_grows_with_acceptance(i51_results):
    """Llama-2-70B TP4 with a Llama-2-7B draft, k=4: each step costs the verification plus
    four draft steps and yields (1 - a^5) / (1 - a) tokens: 2.31 at a=0.6, 3.71 at 0.85."""
    plain, spec = i51_results
    speedup = {a: plain["tpot_s"]["mean"] / s["tpot_s"]["mean"] for a, s in spec.items()}
    assert 1.0 < speedup[0.6] < speedup[0.85]
    assert speedup[0.85] > 1.5
    for a, s in spec.items():
        assert s["spec_tokens_per_step"] == pytest.approx((1 - a ** 5) / (1 - a), rel=0.05)


def test_i52_prefix_caching_with_a_shared_system_prompt_and_chats():
    """Llama-3-8B on one H100: a 2K-token system prompt shared by every request is computed
    once, then found cached (hit ratio ~2048/2300); chats reuse their own history."""
    base = {"model": "llama-3-8b", "gpu": "h100-sxm", "scheduler": "vllm-v1"}
    shared = make_workload(300, qps=10.0, lengths="uniform", prompt_tokens=(100, 400),
                           output_tokens=(50, 250), system_prompt_tokens=2048, seed=1)
    on = simulate(ServeConfig(**base, prefix_caching=True), shared).summary()
    off = simulate(ServeConfig(**base), shared).summary()
    assert on["prefix_hit_ratio"] == pytest.approx(2048 / (2048 + 250), abs=0.05)
    assert on["ttft_s"]["mean"] < 0.5 * off["ttft_s"]["mean"]
    assert on["throughput_tok_s"] >= 0.99 * off["throughput_tok_s"]
    chats = make_workload(200, qps=1.0, lengths="uniform", prompt_tokens=(100, 400),
                          output_tokens=(50, 250), turns=4, think_s=5.0, seed=2)
    on = simulate(ServeConfig(**base, prefix_caching=True), chats).summary()
    off = simulate(ServeConfig(**base), chats).summary()
    assert on["prefix_hit_ratio"] > 0.5 and on["ttft_s"]["mean"] < off["ttft_s"]["mean"]


def test_i54_disaggregated_pools_against_colocated_on_16_h100():
    """Llama-2-70B on 16 H100s: prefill 2xTP4 + decode 2xTP4 with KV over InfiniBand,
    against 4xTP4 co-located, at a QPS where prefills interfere with decodes. The KV of a
    prompt crosses the network in latency + bytes / (4 pairs x 400 Gb/s x efficiency)."""
    w = make_workload(240, qps=6.0, lengths="uniform", prompt_tokens=(1500, 3000),
                      output_tokens=(100, 400), seed=4)
    pool = {"model": "llama-2-70b", "cluster": "dgx-h100", "tp": 4, "scheduler": "vllm-v1",
            "replicas": 2}
    d = simulate_disaggregated(ServeConfig(**pool), ServeConfig(**pool), w)
    ds = d.summary(ttft_slo_s=2.0, tpot_slo_s=0.1)
    cs = simulate(ServeConfig(**pool | {"replicas": 4}), w).summary(2.0, 0.1)
    link, req = d.link, d.requests
    assert link.kind == "infiniband"
    per_token = kv_bytes_per_token(ServeConfig(**pool).model_spec, ServeConfig(**pool).precision,
                                   ParallelPlan())
    hand = link.latency_s + req["prompt_tokens"] * per_token / (4 * link.bandwidth_bps
                                                               * link.bus_efficiency)
    assert req["kv_transfer_s"].to_numpy() == pytest.approx(hand.to_numpy(), rel=1e-12)
    assert ds["tpot_s"]["p90"] < cs["tpot_s"]["p90"]  # decode steps carry no prefill
    assert ds["goodput_req_s"] > 0 and cs["goodput_req_s"] > 0


I54_POOL = {"model": "llama-2-70b", "cluster": "dgx-h100", "tp": 4, "scheduler": "vllm-v1",
            "replicas": 2}


def _i54_goodput(qps: float, tpot_slo_s: float) -> tuple[float, float]:
    """(disaggregated, co-located) goodput in req/s at `qps` (SLO TTFT < 2 s)."""
    w = make_workload(int(40 * qps), qps=qps, lengths="uniform", prompt_tokens=(1500, 3000),
                      output_tokens=(100, 400), seed=4)
    d = simulate_disaggregated(ServeConfig(**I54_POOL), ServeConfig(**I54_POOL), w)
    c = simulate(ServeConfig(**I54_POOL | {"replicas": 4}), w)
    return (d.summary(2.0, tpot_slo_s)["goodput_req_s"],
            c.summary(2.0, tpot_slo_s)["goodput_req_s"])



def test_i54_goodput_sweep_prefill_pool_capacity_decides():
    """The QPS sweep of I5.4. The 2xTP4 prefill pool serves at most 2 / t_prefill(2250 tokens)
    requests per second (the mean prompt; 12.5 req/s here): past it prompts queue and TTFT
    breaks its 2 s SLO, while four co-located replicas still have prefill capacity to spare.
    Below it, with a tight TPOT SLO (30 ms), disaggregation wins: its decode steps carry no
    prefill chunks."""
    sm = step_model_for(ServeConfig(**I54_POOL), None)
    capacity_qps = 2 / sm.step_time_s(prefill_tokens=(2250,), prefill_context=(0,))
    assert 10 < capacity_qps < 16
    # goodput = requests within SLO / (last completion - first arrival): a 40 s run's drain
    # tail keeps even an unloaded deployment at ~0.83 of the offered rate
    over = 1.4 * capacity_qps
    d_over, c_over = _i54_goodput(over, 0.1)
    assert d_over < 0.4 * over and c_over > 0.7 * over
    d_tight, c_tight = _i54_goodput(0.7 * capacity_qps, 0.03)
    assert d_tight > 0.7 * 0.7 * capacity_qps and d_tight > 1.5 * c_tight
