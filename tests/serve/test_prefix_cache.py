"""Prefix caching and chat sessions through the public API: hand-derived hits and TTFTs,
invariants under eviction and preemption, the effect's direction, and clear refusals."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfcast.errors import InputError
from perfcast.serve import ServeConfig, Workload, make_workload, simulate

BASE = {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb"}


@pytest.mark.parametrize("scheduler", ["vllm-v0", "vllm-v1", "sarathi"])
def test_second_request_prefills_only_what_is_not_cached(fake_step_model, scheduler):
    """Two prompts sharing a 2,048-token system prompt (128 blocks of 16), the second sent
    after the first finished: it finds all 128 blocks and prefills its 100 own tokens."""
    w = Workload(np.array([0.0, 10.0]), np.array([2148, 2148]), np.array([10, 10]),
                 prefix_group=np.array([0, 0]), prefix_tokens=np.array([2048, 2048]))
    config = ServeConfig(**BASE, scheduler=scheduler, prefix_caching=True,
                         max_batch_tokens=4096 if scheduler == "vllm-v1" else None,
                         chunk_size=4096 if scheduler == "sarathi" else None)
    r = simulate(config, w, step_model=fake_step_model)
    req = r.requests
    assert req["prefix_hit_tokens"].tolist() == [0, 2048]
    step_s = fake_step_model.step_time_s
    assert req["ttft_s"][1] == pytest.approx(step_s((100,), (2048,)), rel=1e-12)
    assert req["ttft_s"][0] == pytest.approx(step_s((2148,), (0,)), rel=1e-12)
    assert r.summary()["prefix_hit_ratio"] == pytest.approx(2048 / (2 * 2148))
    off = simulate(config.model_copy(update={"prefix_caching": False}), w,
                   step_model=fake_step_model)
    assert off.requests["ttft_s"][1] == pytest.approx(req["ttft_s"][0], rel=1e-12)
    assert "prefix_hit_ratio" not in off.summary()


def test_chat_turns_follow_the_answer_and_reuse_the_conversation(fake_step_model):
    """Turn 2 arrives 1 s after turn 1's last token and finds turn 1's prompt and answer
    cached (its full blocks, leaving its last prompt token to compute)."""
    w = make_workload(2, qps=1.0, lengths="fixed", prompt_tokens=500, output_tokens=50,
                      turns=2, think_s=1.0)
    config = ServeConfig(**BASE, scheduler="vllm-v1", prefix_caching=True)
    req = simulate(config, w, step_model=fake_step_model).requests
    assert req["arrival_s"][1] == pytest.approx(req["completion_s"][0] + 1.0, rel=1e-12)
    assert req["prompt_tokens"].tolist() == [500, 1050]
    assert req["prefix_hit_tokens"][1] == (550 // 16) * 16  # 544 of the 550 earlier tokens


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scheduler=st.sampled_from(["vllm-v0", "vllm-v1", "sarathi"]),
       util=st.sampled_from([0.9, 0.22, 0.2]), n=st.integers(2, 40),
       groups=st.integers(1, 4), turns=st.sampled_from([None, 2, 3]),
       overlap=st.booleans(), seed=st.integers(0, 1000))
def test_invariants_with_prefix_caching(fake_step_model, check_invariants, scheduler, util,
                                        n, groups, turns, overlap, seed):
    kw = {"turns": turns, "think_s": 0.5} if turns else {"system_prompt_tokens": 700,
                                                         "prompt_groups": groups}
    w = make_workload(n, qps=50.0, lengths="uniform", prompt_tokens=(10, 900),
                      output_tokens=(1, 300), max_tokens=None, seed=seed, **kw)
    config = ServeConfig(**BASE, scheduler=scheduler, prefix_caching=True,
                         gpu_memory_utilization=util, host_overlap=overlap, max_batch=64,
                         max_batch_tokens=8192 if scheduler != "sarathi" else None,
                         chunk_size=256 if scheduler == "sarathi" else None)
    r = simulate(config, w, step_model=fake_step_model)
    check_invariants(r, w)
    req = r.requests
    assert (req["prefix_hit_tokens"] <= (req["prompt_tokens"] - 1) * (1 + req["restarts"])).all()
    assert 0.0 <= r.summary()["prefix_hit_ratio"] < 1.0
    if turns:  # a later turn never arrives before its previous turn's answer was seen
        follows = w.follows
        later = np.flatnonzero(follows >= 0)
        assert (req["arrival_s"].to_numpy()[later]
                >= req["completion_s"].to_numpy()[follows[later]] + 0.5 - 1e-9).all()


def test_caching_a_shared_system_prompt_cuts_ttft_under_load(real_step_model):
    w = make_workload(200, qps=8.0, lengths="uniform", prompt_tokens=(50, 300),
                      output_tokens=(20, 200), system_prompt_tokens=2048, seed=1)
    config = ServeConfig(**BASE, scheduler="vllm-v1", max_batch_tokens=65536)
    on = simulate(config.model_copy(update={"prefix_caching": True}), w,
                  step_model=real_step_model).summary()
    off = simulate(config, w, step_model=real_step_model).summary()
    assert on["prefix_hit_ratio"] > 0.8  # 2,048 of ~2,220 prompt tokens are shared
    assert on["ttft_s"]["p50"] < 0.5 * off["ttft_s"]["p50"]
    assert on["e2e_s"]["mean"] < off["e2e_s"]["mean"]


def test_refusals_name_the_field():
    for kw in ({"scheduler": "orca"}, {"preemption": "swap"}):
        with pytest.raises(InputError) as err:
            ServeConfig(**BASE, prefix_caching=True, **kw)
        assert "prefix_caching" in str(err.value)
    with pytest.raises(InputError, match="turns"):
        make_workload(4, qps=1, lengths="fixed", prompt_tokens=10, output_tokens=5, turns=2,
                      system_prompt_tokens=100)
    with pytest.raises(InputError, match="follows"):
        Workload(np.zeros(2), np.array([5, 5]), np.array([5, 5]), follows=np.array([1, -1]))
    with pytest.raises(InputError, match="prefix_tokens"):
        Workload(np.zeros(1), np.array([5]), np.array([5]), prefix_group=np.array([0]),
                 prefix_tokens=np.array([11]))
