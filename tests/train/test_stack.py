"""Software-stack profiles (train/_stack.py): a profile scales the calibrated kernel times by
its fitted factors and nothing else; devices outside the fitted architectures are refused."""

import pytest

from perfcast.errors import InputError
from perfcast.specs import ParallelPlan, get_cluster, get_device, get_model
from perfcast.train import (
    STACKS,
    TrainJob,
    default_time_model,
    forecast_training,
    load_stack,
    stack_time_model,
)


def test_none_is_the_calibrated_model_itself():
    base = default_time_model()
    assert stack_time_model("none", get_device("h100-sxm"), base) is base


@pytest.mark.parametrize("gpu, preset", [("a100-sxm4-80gb", "dgx-a100"), ("h100-sxm", "dgx-h100")])
def test_llm_foundry_scales_one_gpu_iteration_between_its_two_factors(gpu, preset):
    """One GPU, no collectives: the iteration is other x (non-attention) + attention x
    (attention), so its ratio to the unscaled forecast lies between the two factors."""
    job = TrainJob(model=get_model("llama-2-7b"), cluster=get_cluster(preset, 1),
                   plan=ParallelPlan(), seq_len=4096, micro_batch=1, global_batch=1,
                   recompute="full")
    base = default_time_model()
    plain = forecast_training(job, time_model=base).iteration_time_s
    scaled = forecast_training(job, time_model=stack_time_model(
        "llm-foundry", get_device(gpu), base)).iteration_time_s
    (f,) = [f for f in load_stack("llm-foundry")["factors"].values()
            if f["arch"] == get_device(gpu).arch]
    lo, hi = sorted((f["other"], f["attention"]))
    assert lo * (1 - 1e-9) <= scaled / plain <= hi * (1 + 1e-9)
    assert scaled > plain  # the stack reaches less than the benchmarked kernels


def test_profiles_are_refused_where_nothing_was_fitted():
    with pytest.raises(InputError) as e:
        stack_time_model("llm-foundry", get_device("b200-sxm"), default_time_model())
    assert e.value.field == "stack" and "Blackwell" in str(e.value)
    with pytest.raises(InputError) as e:
        stack_time_model("megatron", get_device("h100-sxm"), default_time_model())
    assert e.value.field == "stack" and list(STACKS) == ["none", "llm-foundry"]


def test_shipped_profile_carries_its_provenance():
    doc = load_stack("llm-foundry")
    assert "llm-foundry" in doc["stack"] and "@4952183" in doc["stack"]
    assert {f["arch"] for f in doc["factors"].values()} == {"Ampere", "Hopper"}
    assert all(f["other"] > 0 and f["attention"] > 0 for f in doc["factors"].values())
    assert 0 < doc["heldout_tokens_per_s_mape"]["heldout_model"]["all"] < 1
