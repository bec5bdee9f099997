"""Disaggregated prefill/decode through the public API: a request priced by hand, the KV
link's queue, the interference it removes, and refusals."""

import numpy as np
import pytest

from perfcast.errors import InputError
from perfcast.ops import kv_bytes_per_token
from perfcast.progress import reporting
from perfcast.serve import ServeConfig, Workload, make_workload, simulate, simulate_disaggregated
from perfcast.specs import ParallelPlan

POOL = {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb", "scheduler": "vllm-v1"}


def test_one_request_priced_by_hand(fake_step_model):
    """Prefill pool: 1,000-token prefill. Link: latency + KV bytes / bandwidth. Decode pool:
    the first token's KV with 1,000 cached tokens (yields token 2), then one decode step."""
    config = ServeConfig(**POOL)
    w = Workload(np.array([0.0]), np.array([1000]), np.array([3]))
    r = simulate_disaggregated(config, config, w, prefill_step_model=fake_step_model,
                               decode_step_model=fake_step_model)
    link = r.link
    kv_bytes = 1000 * kv_bytes_per_token(config.model_spec, config.precision, ParallelPlan())
    transfer = link.latency_s + kv_bytes / (link.bandwidth_bps * link.bus_efficiency)
    step_s = fake_step_model.step_time_s
    prefill = step_s((1000,), (0,))
    req = r.requests
    assert req["kv_transfer_s"][0] == pytest.approx(transfer, rel=1e-12)
    assert req["ttft_s"][0] == pytest.approx(prefill + transfer, rel=1e-12)
    decode = step_s((1,), (1000,)) + step_s((), (), (1002,))
    assert req["e2e_s"][0] == pytest.approx(prefill + transfer + decode, rel=1e-12)
    assert req["tpot_s"][0] == pytest.approx(decode / 2, rel=1e-12)


def test_transfers_queue_on_the_prefill_replicas_link(fake_step_model):
    config = ServeConfig(**POOL)
    w = Workload(np.zeros(2), np.array([4000, 4000]), np.array([5, 5]))
    req = simulate_disaggregated(config, config, w, prefill_step_model=fake_step_model,
                                 decode_step_model=fake_step_model).requests
    assert req["prefill_done_s"][0] == req["prefill_done_s"][1]  # one prefill step
    assert req["kv_wait_s"][1] == pytest.approx(req["kv_transfer_s"][0], rel=1e-12)


def test_separating_prefill_removes_its_interference_with_decode(real_step_model):
    """Long prompts arriving among decodes: co-located, every prefill stalls the decodes
    sharing its replica; disaggregated, decode steps carry no prefill, so TPOT drops."""
    w = make_workload(120, qps=6.0, lengths="uniform", prompt_tokens=(2000, 3500),
                      output_tokens=(100, 300), seed=3)
    config = ServeConfig(**POOL, max_batch_tokens=65536)
    disagg = simulate_disaggregated(config, config, w, prefill_step_model=real_step_model,
                                    decode_step_model=real_step_model).summary(1.0, 0.05)
    coloc = simulate(config.model_copy(update={"replicas": 2}), w,
                     step_model=real_step_model).summary(1.0, 0.05)
    assert disagg["tpot_s"]["p90"] < coloc["tpot_s"]["p90"]
    assert disagg["kv_transfer_s"]["mean"] > 0 and disagg["decode_pool"]["kv_blocks"] > 0


def test_refusals_name_the_field():
    w = Workload(np.zeros(1), np.array([10]), np.array([5]))
    a = ServeConfig(**POOL)
    for decode, field in ((ServeConfig(**{**POOL, "model": "llama-2-13b"}), "decode"),
                          (ServeConfig(**{**POOL, "scheduler": "orca"}), "decode.scheduler")):
        with pytest.raises(InputError) as err:
            simulate_disaggregated(a, decode, w)
        assert field in str(err.value)
    chats = make_workload(4, qps=1.0, prompt_tokens=10, output_tokens=5, turns=2)
    with pytest.raises(InputError, match="workload"):
        simulate_disaggregated(a, a, chats)


def test_a_closed_loop_is_a_fixed_point_of_open_loop_runs():
    """A client keeping 2 requests in flight: request k + 2 arrives when request k is done."""
    a = ServeConfig(**POOL)
    w = Workload(np.zeros(6), np.full(6, 64), np.full(6, 8), 2)
    r = simulate_disaggregated(a, a, w).requests
    assert (r["arrival_s"].iloc[:2] == 0).all() and (r["arrival_s"].iloc[2:] > 0).all()
    assert r["arrival_s"].max() < r["completion_s"].max() and len(r) == 6


def _closed(real_step_model, host_overlap: bool):
    """A closed loop of 16 clients over 1 prefill and 2 decode replicas; without host
    overlap some requests want one token (done at prefill). With it, such a request's
    completion, seen when its idle replica reports it, sends the slot's next request to that
    replica at that very instant, which an open-loop run would have queued first: a tie the
    fixed point leaves open."""
    pre = ServeConfig(**POOL, host_overlap=host_overlap)
    dec = ServeConfig(**POOL, host_overlap=host_overlap, replicas=2)
    w = make_workload(120, arrival="closed_loop", concurrency=16, lengths="uniform",
                      prompt_tokens=(200, 900), output_tokens=(2, 120), seed=1)
    one = (np.arange(120) % 7 == 3) & (not host_overlap)
    w = Workload(w.arrival_s, w.prompt_tokens, np.where(one, 1, w.output_tokens), 16)
    models = {"prefill_step_model": real_step_model, "decode_step_model": real_step_model}
    return pre, dec, models, simulate_disaggregated(pre, dec, w, **models)


@pytest.mark.parametrize("host_overlap", [False, True])
def test_a_closed_loop_run_is_the_fixed_point_of_open_loop_runs(real_step_model,
                                                                  host_overlap):
    """The one-pass closed loop equals the path it replaces: replaying its arrivals as an
    open-loop run gives back its completions, TTFTs and TPOTs (exactly: the fixed point)."""
    pre, dec, models, r = _closed(real_step_model, host_overlap)
    q = r.requests
    assert (q["output_tokens"] == 1).any() != host_overlap
    assert (q["id"] == np.arange(len(q))).all()
    assert (np.diff(q["arrival_s"]) >= 0).all()  # in arrival order, as an open loop
    w = Workload(q["arrival_s"].to_numpy(), q["prompt_tokens"].to_numpy(),
                 q["output_tokens"].to_numpy())
    o = simulate_disaggregated(pre, dec, w, **models).requests
    for col in ("prefill_done_s", "kv_end_s", "completion_s", "ttft_s", "tpot_s"):
        np.testing.assert_allclose(o[col], q[col], rtol=1e-12, atol=1e-12, err_msg=col)


def test_a_closed_loop_keeps_concurrency_requests_in_flight(real_step_model):
    """16 start at 0; every later arrival is an earlier request's completion; at no time
    more than 16 in flight (the fixed-point sweeps did not guarantee it: they stopped on the
    means)."""
    _, _, _, r = _closed(real_step_model, True)
    q = r.requests
    later = q["arrival_s"][q["arrival_s"] > 0].to_numpy()
    assert (q["arrival_s"] == 0).sum() == 16 and len(later) == len(q) - 16
    assert np.isin(later, q["completion_s"].to_numpy()).all()
    for t in np.unique(q["arrival_s"]):
        assert ((q["arrival_s"] <= t) & (q["completion_s"] > t)).sum() <= 16


def test_a_closed_loop_run_is_deterministic(real_step_model):
    a, b = (_closed(real_step_model, True)[3] for _ in range(2))
    assert a.requests.equals(b.requests)
    assert a.decode.requests.equals(b.decode.requests)


def test_a_closed_loop_reports_its_progress(fake_step_model):
    """As `simulate` does: done and total requests, ending at total."""
    a = ServeConfig(**POOL)
    w = Workload(np.zeros(6), np.full(6, 64), np.full(6, 8), 2)
    seen = []
    with reporting(lambda done, total: seen.append((done, total))):
        simulate_disaggregated(a, a, w, prefill_step_model=fake_step_model,
                               decode_step_model=fake_step_model)
    assert seen and seen[-1] == (6, 6)
