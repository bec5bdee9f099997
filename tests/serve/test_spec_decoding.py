"""Speculative decoding through the public API: the yield matches the closed form, a case
priced by hand, the batch-size effect on the speedup, memory, runs vs single steps,
invariants and refusals."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import perfcast.serve._stepper as stepper
from perfcast.errors import InputError
from perfcast.serve import ServeConfig, Workload, make_workload, simulate
from perfcast.serve._spec import expected_tokens, yield_probabilities

BASE = {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb", "scheduler": "vllm-v1",
        "max_batch_tokens": 8192}


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8))
def test_yield_distribution_is_a_distribution_with_the_closed_form_mean(rates):
    p = yield_probabilities(tuple(rates))
    assert p.min() >= 0 and p.sum() == pytest.approx(1.0)
    assert p @ np.arange(1, len(p) + 1) == pytest.approx(expected_tokens(tuple(rates)))
    a, k = rates[0], len(rates)
    if a < 1:  # one rate for every position: (1 - a^(k+1)) / (1 - a)
        assert expected_tokens((a,) * k) == pytest.approx((1 - a ** (k + 1)) / (1 - a))


def test_simulated_yield_matches_the_closed_form(real_step_model):
    w = make_workload(60, qps=2.0, lengths="fixed", prompt_tokens=200, output_tokens=300)
    s = simulate(ServeConfig(**BASE, spec_k=4, spec_acceptance=0.7), w,
                 step_model=real_step_model).summary()
    assert s["spec_expected_tokens_per_step"] == pytest.approx((1 - 0.7 ** 5) / 0.3)
    assert s["spec_tokens_per_step"] == pytest.approx(s["spec_expected_tokens_per_step"],
                                                      rel=0.03)


def test_full_acceptance_priced_by_hand(real_step_model):
    """k=3, every draft accepted: after the prefill's token, each step verifies 4 positions
    and keeps all 4, so 9 output tokens take the prefill and 2 verification steps."""
    w = Workload(np.array([0.0]), np.array([100]), np.array([9]))
    r = simulate(ServeConfig(**BASE, spec_k=3, spec_acceptance=1.0), w,
                 step_model=real_step_model).requests
    m = real_step_model
    verify = [m.stats_time_s(4, 1, c + 4, 4 * c + 10, 0, 0) for c in (100, 104)]
    assert r["ttft_s"][0] == pytest.approx(m.stats_time_s(100, 1, 100, 5050, 0, 0),
                                           rel=1e-12)
    assert r["e2e_s"][0] - r["ttft_s"][0] == pytest.approx(sum(verify), rel=1e-12)


def test_speculation_helps_at_low_batch_and_less_near_saturation(real_step_model):
    """Verification of k + 1 positions is nearly free while decode is memory-bound; as the
    batch grows toward compute saturation it costs more, so the TPOT speedup shrinks."""
    speedups = []
    for n in (1, 48):
        w = Workload(np.zeros(n), np.full(n, 500), np.full(n, 200), concurrency=n)
        plain = simulate(ServeConfig(**BASE), w, step_model=real_step_model).summary()
        spec = simulate(ServeConfig(**BASE, spec_k=4, spec_acceptance=0.8), w,
                        step_model=real_step_model).summary()
        speedups.append(plain["tpot_s"]["mean"] / spec["tpot_s"]["mean"])
    assert speedups[0] > 2.0 and speedups[1] < speedups[0]


def test_a_draft_model_costs_time_and_memory():
    w = make_workload(30, qps=1.0, lengths="fixed", prompt_tokens=300, output_tokens=100)
    base = {"model": "llama-2-13b", "gpu": "a100-sxm4-80gb", "scheduler": "vllm-v1",
            "spec_k": 4, "spec_acceptance": 0.8}
    free = simulate(ServeConfig(**base), w).summary()
    shared = simulate(ServeConfig(**base, spec_draft_model="llama-2-7b"), w).summary()
    apart = simulate(ServeConfig(**base, spec_draft_model="llama-2-7b",
                                 spec_draft_gpu="separate"), w).summary()
    assert shared["tpot_s"]["mean"] > free["tpot_s"]["mean"]
    assert shared["kv_blocks"] < apart["kv_blocks"] == free["kv_blocks"]


def test_runs_match_one_event_per_step(real_step_model, monkeypatch):
    w = make_workload(40, qps=4.0, lengths="uniform", prompt_tokens=(50, 800),
                      output_tokens=(1, 300), seed=2)
    config = ServeConfig(**BASE, spec_k=3, spec_acceptance=(0.9, 0.7, 0.5))
    fast = simulate(config, w, step_model=real_step_model)
    monkeypatch.setattr(stepper, "MAX_RUN_STEPS", 1)
    slow = simulate(config, w, step_model=real_step_model)
    for col in ("first_token_s", "completion_s"):
        np.testing.assert_allclose(fast.requests[col], slow.requests[col], rtol=1e-9)
    assert fast.summary()["spec_tokens_per_step"] == slow.summary()["spec_tokens_per_step"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scheduler=st.sampled_from(["vllm-v0", "vllm-v1", "sarathi"]),
       k=st.integers(1, 6), a=st.floats(0.0, 1.0), util=st.sampled_from([0.9, 0.22]),
       n=st.integers(1, 30), seed=st.integers(0, 100))
def test_invariants_with_speculation(real_step_model, check_invariants, scheduler, k, a,
                                     util, n, seed):
    w = make_workload(n, qps=30.0, lengths="uniform", prompt_tokens=(10, 900),
                      output_tokens=(1, 400), seed=seed)
    config = ServeConfig(model="llama-2-7b", gpu="a100-sxm4-80gb", scheduler=scheduler,
                         spec_k=k, spec_acceptance=a, gpu_memory_utilization=util,
                         max_batch=32, max_batch_tokens=4096 if scheduler != "sarathi"
                         else None, chunk_size=512 if scheduler == "sarathi" else None)
    check_invariants(simulate(config, w, step_model=real_step_model), w)


def test_refusals_name_the_field():
    cases = [({"spec_k": 4, "spec_acceptance": 1.5}, "spec_acceptance"),
             ({"spec_k": 3, "spec_acceptance": (0.9, 0.8)}, "spec_acceptance"),
             ({"spec_k": 4, "scheduler": "orca"}, "spec_k"),
             ({"spec_draft_model": "llama-2-7b"}, "spec_k"),
             ({"spec_k": 2, "spec_draft_model": "llama-2-7bb"}, "llama-2-7b")]
    for kw, field in cases:
        with pytest.raises(InputError) as err:
            ServeConfig(model="llama-2-13b", gpu="a100-sxm4-80gb", **kw)
        assert field in str(err.value)
