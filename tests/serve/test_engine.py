"""Behaviour of `simulate` through the public API: invariants over random workloads and
deployments, overload and memory exhaustion, determinism, runs versus single steps."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import perfcast.serve._stepper as stepper
from perfcast.serve import ServeConfig, Workload, make_workload, simulate

BASE = {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb"}
SCHEDULERS = ["vllm-v0", "vllm-v1", "sarathi", "orca", "static"]


def small_workload(n=40, qps=20.0, seed=0, prompt=(16, 600), output=(1, 200)):
    return make_workload(n, qps=qps, lengths="uniform", prompt_tokens=prompt,
                         output_tokens=output, seed=seed)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scheduler=st.sampled_from(SCHEDULERS), replicas=st.integers(1, 3),
       router=st.sampled_from(["round-robin", "least-outstanding", "least-kv"]),
       preemption=st.sampled_from(["recompute", "swap"]), block=st.sampled_from([8, 16, 32]),
       util=st.sampled_from([0.9, 0.25, 0.2]), n=st.integers(1, 30),
       qps=st.floats(0.5, 500.0), closed=st.sampled_from([None, 1, 4]),
       seed=st.integers(0, 10_000), overlap=st.booleans())
def test_invariants_hold_on_random_deployments(fake_step_model, check_invariants, scheduler,
                                               replicas, router,
                                               preemption, block, util, n, qps, closed, seed,
                                               overlap):
    config = ServeConfig(**BASE, scheduler=scheduler, replicas=replicas, router=router,
                         preemption=preemption, block_size=block, gpu_memory_utilization=util,
                         host_overlap=overlap,
                         max_batch=64, max_batch_tokens=4096 if scheduler != "sarathi" else None,
                         chunk_size=256 if scheduler == "sarathi" else None)
    rng = np.random.default_rng(seed)
    w = Workload(np.sort(rng.uniform(0, n / qps, n)), rng.integers(1, 1200, n),
                 rng.integers(1, 800, n), closed)
    result = simulate(config, w, seed=seed, step_model=fake_step_model)
    check_invariants(result, w)
    if closed:  # never more than `concurrency` requests in flight
        r = result.requests
        events = sorted([(t, 1) for t in r["arrival_s"]] + [(t, -1) for t in r["completion_s"]],
                        key=lambda e: (e[0], e[1]))
        assert max(np.cumsum([e[1] for e in events])) <= closed


@pytest.mark.parametrize("scheduler", ["vllm-v0", "vllm-v1", "sarathi"])
@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_overload_and_memory_exhaustion_finish_with_preemptions(fake_step_model,
                                                                check_invariants, scheduler,
                                                                preemption):
    # 0.25 x 80 GB leaves ~650 blocks (~10k tokens): a few long requests exhaust them
    config = ServeConfig(**BASE, scheduler=scheduler, preemption=preemption,
                         gpu_memory_utilization=0.25, max_batch=64)
    w = small_workload(n=60, qps=1e4, prompt=(500, 1500), output=(200, 1500))
    result = simulate(config, w, step_model=fake_step_model)
    check_invariants(result, w)
    s = result.summary()
    assert s["preemptions"] > 0 and result.replicas["kv_peak_blocks"].max() > 0.9 * s["kv_blocks"]
    if preemption == "recompute" or scheduler != "vllm-v0":
        assert s["restarts"] > 0


def test_same_seed_gives_bit_identical_results(real_step_model):
    config = ServeConfig(**BASE, replicas=2, router="least-kv")
    w = small_workload(n=60, qps=30.0)
    a, b = (simulate(config, w, seed=7, step_model=real_step_model) for _ in range(2))
    assert a.requests.equals(b.requests) and a.summary() == b.summary()
    assert np.array_equal(a.itl_values_s, b.itl_values_s)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_keeping_a_timeline_changes_no_metric(fake_step_model, scheduler):
    """Runs are logged in plain Python without a timeline and with numpy arrays with one:
    the same KV utilisation and fragmentation (to rounding), the same everything else."""
    config = ServeConfig(**BASE, scheduler=scheduler, gpu_memory_utilization=0.25)
    w = small_workload(n=60, qps=20.0, prompt=(300, 1500), output=(50, 800))
    plain, kept = (simulate(config, w, step_model=fake_step_model, timeline=t).summary()
                   for t in (False, True))
    for key in ("kv_utilisation_mean", "kv_fragmentation_mean"):
        assert kept.pop(key) == pytest.approx(plain.pop(key), rel=1e-12)
    assert kept == plain


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_runs_of_decode_steps_match_one_event_per_step(real_step_model, monkeypatch, scheduler):
    config = ServeConfig(**BASE, scheduler=scheduler, max_batch_tokens=4096
                         if scheduler != "sarathi" else None, gpu_memory_utilization=0.25)
    w = small_workload(n=40, qps=4.0, seed=3, output=(1, 400))
    fast = simulate(config, w, step_model=real_step_model)
    monkeypatch.setattr(stepper, "MAX_RUN_STEPS", 1)
    slow = simulate(config, w, step_model=real_step_model)
    assert fast.summary()["steps"] == slow.summary()["steps"]
    for col in ("first_token_s", "completion_s"):
        np.testing.assert_allclose(fast.requests[col], slow.requests[col], rtol=1e-9)
    np.testing.assert_allclose(fast.summary()["itl_s"]["mean"], slow.summary()["itl_s"]["mean"],
                               rtol=1e-9)


def test_static_batches_run_to_completion(fake_step_model):
    config = ServeConfig(**BASE, scheduler="static", max_batch=4)
    w = Workload(np.zeros(8), np.full(8, 100), np.array([5, 50, 5, 5, 5, 5, 5, 5]))
    r = simulate(config, w, step_model=fake_step_model).requests
    assert r["first_token_s"][:4].nunique() == 1  # one prefill step for the batch
    # the second batch starts only after the slowest of the first (50 tokens) finished
    assert r["first_token_s"][4:].min() > r["completion_s"][:4].max()


def test_orca_admits_between_iterations(fake_step_model):
    config = ServeConfig(**BASE, scheduler="orca", max_batch=4)
    w = Workload(np.zeros(8), np.full(8, 100), np.array([5, 50, 5, 5, 5, 5, 5, 5]))
    r = simulate(config, w, step_model=fake_step_model).requests
    assert r["first_token_s"][4:].min() < r["completion_s"][1]


def test_round_robin_alternates_and_least_outstanding_balances(fake_step_model):
    w = small_workload(n=12, qps=100.0)
    for router in ("round-robin", "least-outstanding"):
        r = simulate(ServeConfig(**BASE, replicas=3, router=router), w,
                     step_model=fake_step_model).requests
        assert sorted(r["replica"].value_counts()) == [4, 4, 4]
    r = simulate(ServeConfig(**BASE, replicas=3), w, step_model=fake_step_model).requests
    assert list(r["replica"][:6]) == [0, 1, 2, 0, 1, 2]


def test_a_request_that_can_never_fit_is_refused(fake_step_model):
    from perfcast.errors import InputError
    config = ServeConfig(**BASE, gpu_memory_utilization=0.19)
    with pytest.raises(InputError) as err:
        simulate(config, Workload(np.zeros(1), np.array([4000]), np.array([96])),
                 step_model=fake_step_model)
    assert err.value.field == "gpu_memory_utilization"


def test_overlapped_engines_report_tokens_one_step_late(fake_step_model):
    """host_overlap: step n's tokens reach the client when step n+1 ends; a lone request's
    TTFT grows by its first decode step, its E2E not at all (the replica idles after its
    last step, so that output goes out at once)."""
    lone = Workload(np.array([0.0]), np.array([100]), np.array([3]), None)
    plain = simulate(ServeConfig(**BASE), lone, step_model=fake_step_model, timeline=True)
    lag = simulate(ServeConfig(**BASE, host_overlap=True), lone, step_model=fake_step_model)
    first_decode_s = plain.timelines[0]["duration_s"][1]  # step 0 prefills
    assert lag.requests["ttft_s"][0] == pytest.approx(plain.requests["ttft_s"][0]
                                                      + first_decode_s, rel=1e-12)
    assert lag.requests["e2e_s"][0] == pytest.approx(plain.requests["e2e_s"][0], rel=1e-12)
    # closed loop: the client sends its next request when it sees the completion
    three = Workload(np.zeros(3), np.array([50, 50, 50]), np.array([2, 50, 2]), 2)
    plain = simulate(ServeConfig(**BASE), three, step_model=fake_step_model).requests
    lag = simulate(ServeConfig(**BASE, host_overlap=True), three,
                   step_model=fake_step_model).requests
    assert lag["arrival_s"][2] == lag["completion_s"][0] > plain["completion_s"][0]
    assert plain["arrival_s"][2] == plain["completion_s"][0]

