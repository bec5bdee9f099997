"""Shared deployments for the serve tests: one real step model (priced lazily, shared so its
grid is priced once per session) and a cheap linear test double for property tests."""

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
