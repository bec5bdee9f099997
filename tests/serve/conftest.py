"""Shared deployments for the serve tests: one real step model (priced lazily, shared so its
grid is priced once per session) and a cheap linear test double for property tests."""

import numpy as np
import pytest

from perfcast.serve import ServeConfig, step_model_for

BASE = {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb"}


class LinearStepModel:
    """Test double of ServingStepModel: 4 ms + 20 us per new token + 10 ns per key read."""

    window = None

    def step_time_s(self, prefill_tokens=(), prefill_context=(), decode_context=()):
        tokens = sum(prefill_tokens) + len(decode_context)
        pairs = zip(prefill_tokens, prefill_context, strict=True)
        keys = sum(decode_context) + sum(q * c + q * (q + 1) / 2 for q, c in pairs)
        return 4e-3 + 2e-5 * tokens + 1e-8 * keys


@pytest.fixture(scope="session")
def real_step_model():
    """Llama-2-7B on one A100-80GB with grids big enough for every scheduler in the tests."""
    return step_model_for(ServeConfig(**BASE, scheduler="orca", max_batch_tokens=65536))


@pytest.fixture(scope="session")
def fake_step_model():
    return LinearStepModel()


def _invariants(result, workload):
    """Every request completes exactly once, tokens are conserved, time runs forward,
    KV never exceeds capacity."""
    r = result.requests
    assert len(r) == len(workload) and r["id"].is_unique
    assert np.isfinite(r["completion_s"]).all(), "every request completes"
    assert (r["generated_tokens"] == r["output_tokens"]).all(), "tokens conserved"
    assert r["generated_tokens"].sum() == int(np.sum(workload.output_tokens))
    assert (r["first_token_s"] >= r["arrival_s"]).all()
    assert (r["ttft_s"] <= r["e2e_s"] + 1e-12).all()
    assert (r["queueing_delay_s"] >= 0).all()
    assert (result.replicas["kv_peak_blocks"] <= result.kv_blocks).all()
    one = r["output_tokens"] == 1
    assert (r.loc[one, "first_token_s"] == r.loc[one, "completion_s"]).all()


@pytest.fixture(scope="session")
def check_invariants():
    return _invariants
