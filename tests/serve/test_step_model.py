"""The step-model Protocols `simulate` consumes: a constant-time test double drives a whole
simulation; the shipped ServingStepModel satisfies the richer protocol."""

import numpy as np
import pytest

from perfcast.errors import InputError
from perfcast.serve import (
    ServeConfig,
    StatsStepTimeModel,
    StepTimeModel,
    Workload,
    simulate,
    step_model_for,
)

BASE = {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb"}
STEP_S = 0.01


class ConstantStepModel:
    """Every step takes STEP_S, whatever the batch: a StepTimeModel and nothing more."""

    window = None

    def step_time_s(self, prefill_tokens=(), prefill_context=(), decode_context=()):
        return STEP_S


def test_the_double_is_a_step_model_and_the_shipped_model_a_stats_one():
    assert isinstance(ConstantStepModel(), StepTimeModel)
    assert not isinstance(ConstantStepModel(), StatsStepTimeModel)
    assert isinstance(step_model_for(ServeConfig(**BASE)), StatsStepTimeModel)


@pytest.mark.parametrize("scheduler", ["vllm-v0", "vllm-v1", "sarathi", "orca"])
def test_a_constant_step_model_drives_the_simulation(scheduler):
    """Requests far apart run alone: first token after one step, then one token per step."""
    outputs = np.array([1, 5, 40])
    w = Workload(np.array([0.0, 10.0, 20.0]), np.array([100, 200, 300]), outputs)
    config = ServeConfig(**BASE, scheduler=scheduler)
    r = simulate(config, w, step_model=ConstantStepModel()).requests
    np.testing.assert_allclose(r["ttft_s"], STEP_S, rtol=1e-12)
    np.testing.assert_allclose(r["e2e_s"], outputs * STEP_S, rtol=1e-12)
    assert (r["generated_tokens"] == outputs).all()


def test_paths_a_single_step_model_cannot_price_are_refused():
    w = Workload(np.array([0.0]), np.array([100]), np.array([4]))
    for config in (ServeConfig(**BASE, pp=2), ServeConfig(**BASE, execution="eager")):
        with pytest.raises(InputError) as err:
            simulate(config, w, step_model=ConstantStepModel())
        assert err.value.field == "step_model"
