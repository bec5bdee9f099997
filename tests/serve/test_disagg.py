"""Disaggregated prefill/decode through the public API: a request priced by hand, the KV
link's queue, the interference it removes, and refusals."""

import numpy as np
import pytest

from perfcast.errors import InputError
from perfcast.ops import kv_bytes_per_token
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
