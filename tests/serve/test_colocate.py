"""Co-located models (I4.1) through the public API: time-slicing priced by hand, MPS
partitions, memory split, invariants and refusals."""

import numpy as np
import pytest

from perfcast.errors import InputError
from perfcast.serve import ServeConfig, Workload, make_workload, simulate, simulate_colocated

H100 = {"gpu": "h100-sxm", "scheduler": "vllm-v1"}


def test_time_slicing_priced_by_hand(fake_step_model):
    """Two models, one request each at t=0: A's prefill, then B's (it waited), then their
    decode steps alternate, so each decode gap is both models' step."""
    config = ServeConfig(model="llama-2-7b", **H100)
    one = Workload(np.zeros(1), np.array([200]), np.array([3]))
    a, b = simulate_colocated([config, config], [one, one], step_models=[fake_step_model] * 2)
    step_s = fake_step_model.step_time_s
    p, d1, d2 = step_s((200,), (0,)), step_s((), (), (201,)), step_s((), (), (202,))
    assert a.requests["ttft_s"][0] == pytest.approx(p, rel=1e-12)
    assert b.requests["ttft_s"][0] == pytest.approx(2 * p, rel=1e-12)
    assert a.requests["e2e_s"][0] == pytest.approx(2 * p + d1 + d1 + d2, rel=1e-12)
    assert b.requests["e2e_s"][0] == pytest.approx(2 * p + 2 * d1 + 2 * d2, rel=1e-12)


def test_i41_two_7b_models_on_one_h100_against_dedicated_gpus():
    """Llama-2-7B + Mistral-7B sharing one H100 (half the memory each): decode is
    memory-bound, so sharing the GPU roughly doubles TPOT either way; each model gets fewer
    KV blocks than on a GPU of its own."""
    configs = [ServeConfig(model=m, **H100) for m in ("llama-2-7b", "mistral-7b")]
    loads = [make_workload(120, qps=2.0, lengths="uniform", prompt_tokens=(100, 1500),
                           output_tokens=(50, 300), seed=s) for s in (1, 2)]
    alone = [simulate(c, w).summary() for c, w in zip(configs, loads, strict=True)]
    for sharing in ("time-slice", "mps"):
        shared = [r.summary() for r in simulate_colocated(configs, loads, sharing=sharing)]
        for a, s in zip(alone, shared, strict=True):
            assert 1.3 < s["tpot_s"]["mean"] / a["tpot_s"]["mean"] < 2.3
            assert s["ttft_s"]["mean"] > a["ttft_s"]["mean"]
            assert s["kv_blocks"] < a["kv_blocks"]


def test_an_mps_partition_slows_steps_by_its_share(real_step_model):
    config = ServeConfig(model="llama-2-7b", gpu="a100-sxm4-80gb", scheduler="vllm-v1")
    w = make_workload(30, qps=1.0, lengths="fixed", prompt_tokens=300, output_tokens=100)
    full = simulate(config, w, step_model=real_step_model).summary()
    (part,) = simulate_colocated([config], [w], sharing="mps", compute_split=[0.5],
                                 memory_split=[1.0])
    ratio = part.summary()["tpot_s"]["mean"] / full["tpot_s"]["mean"]
    assert 1.5 < ratio <= 2.05  # bandwidth halved; fixed costs (launch, host) are not


def test_refusals_name_the_field():
    a = ServeConfig(model="llama-2-7b", **H100)
    w = Workload(np.zeros(1), np.array([10]), np.array([5]))
    cases = [(dict(configs=[a, ServeConfig(model="llama-2-7b", gpu="a100-sxm4-80gb")],
                   workloads=[w, w]), "configs"),
             (dict(configs=[a, a], workloads=[w, w], memory_split=[0.7, 0.7]), "memory_split"),
             (dict(configs=[a, a], workloads=[w, w], compute_split=[0.5, 0.5]),
              "compute_split"),
             (dict(configs=[a, a], workloads=[w]), "workloads"),
             (dict(configs=[a], workloads=[w], sharing="mig"), "sharing"),
             (dict(configs=[a, ServeConfig(model="llama-2-7b", **H100, kv_budget="free")],
                   workloads=[w, w]), "kv_budget")]
    for kw, field in cases:
        with pytest.raises(InputError) as err:
            simulate_colocated(**kw)
        assert field in str(err.value)
