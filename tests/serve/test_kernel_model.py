"""ServeConfig.kernel_model reaches every step model a deployment builds: the target's,
the draft model's, disaggregated pools' and co-located models' (their configs are copies),
and the validation replay's step-model cache keeps the two apart."""

import pytest

from perfcast.errors import InputError
from perfcast.kernels import default_time_model
from perfcast.kernels._learned import LearnedTimeModel
from perfcast.serve import ServeConfig, make_workload, simulate, simulate_disaggregated
from perfcast.serve._engine import _draft_model, step_model_for
from perfcast.validate._serving_sim import cached_step_model

BASE = {"model": "llama-2-7b", "gpu": "h100-sxm", "stack": "trtllm", "max_batch": 32}


def _learned(step_model) -> bool:
    """The step model prices with the learned model (under a stack's routes, if any)."""
    model = step_model.time_model
    return isinstance(getattr(model, "default", model), LearnedTimeModel)


def test_calibrated_by_default_learned_on_request():
    assert ServeConfig(**BASE).kernel_model == "calibrated"
    assert not _learned(step_model_for(ServeConfig(**BASE)))
    assert _learned(step_model_for(ServeConfig(**BASE, kernel_model="learned")))


def test_an_explicit_time_model_still_wins():
    config = ServeConfig(**BASE, kernel_model="learned")
    assert step_model_for(config, default_time_model()).time_model is default_time_model()


def test_roofline_is_refused_naming_the_field():
    with pytest.raises(InputError) as err:
        ServeConfig(**BASE, kernel_model="roofline")
    assert err.value.field == "kernel_model" and "learned" in str(err.value)


def test_draft_model_and_pools_price_with_the_deployments_kernel_model():
    config = ServeConfig(**{**BASE, "model": "llama-2-13b"}, spec_k=2,
                         spec_draft_model="llama-2-7b", kernel_model="learned")
    assert _learned(_draft_model(config))
    pool = ServeConfig(**BASE, kernel_model="learned")
    w = make_workload(12, arrival="poisson", qps=4.0, prompt_tokens=256, output_tokens=16,
                      seed=0)
    learned = simulate_disaggregated(pool, pool, w).summary()
    calibrated_pool = ServeConfig(**BASE)
    calibrated = simulate_disaggregated(calibrated_pool, calibrated_pool, w).summary()
    assert learned["tpot_s"]["mean"] != calibrated["tpot_s"]["mean"]
    assert simulate(pool, w).summary()["tpot_s"]["mean"] != \
        simulate(calibrated_pool, w).summary()["tpot_s"]["mean"]


def test_replay_cache_keeps_the_kernel_models_apart():
    calibrated = cached_step_model(ServeConfig(**BASE), None)
    learned = cached_step_model(ServeConfig(**BASE, kernel_model="learned"), None)
    assert calibrated is not learned and _learned(learned) and not _learned(calibrated)
    assert cached_step_model(ServeConfig(**BASE), None) is calibrated
