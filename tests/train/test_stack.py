"""Software-stack profiles (train/_stack.py): a profile scales the calibrated kernel times by
its fitted factors (attention by the legacy-kernel penalty on newer GPUs) and prices its
overlap loss; devices outside the fitted architectures are refused; schema-1 profiles still
load."""

import json
from pathlib import Path

import pytest

import perfcast.train._stack as stack_module
from perfcast.errors import InputError
from perfcast.specs import ParallelPlan, get_cluster, get_device, get_model
from perfcast.train import (
    LEGACY_ATTENTION,
    STACKS,
    CommOverlap,
    TrainJob,
    attention_penalty,
    default_time_model,
    forecast_training,
    load_stack,
    stack_overlap,
    stack_time_model,
)

SCHEMA_1 = Path(__file__).parent / "data" / "stack_llm_foundry_schema1.json"


def test_none_is_the_calibrated_model_itself():
    base = default_time_model()
    assert stack_time_model("none", get_device("h100-sxm"), base) is base
    assert stack_overlap("none") == CommOverlap()


def _one_gpu_ratio(gpu: str, preset: str) -> float:
    job = TrainJob(model=get_model("llama-2-7b"), cluster=get_cluster(preset, 1),
                   plan=ParallelPlan(), seq_len=4096, micro_batch=1, global_batch=1,
                   recompute="full")
    base = default_time_model()
    plain = forecast_training(job, time_model=base).iteration_time_s
    scaled = forecast_training(job, time_model=stack_time_model(
        "llm-foundry", get_device(gpu), base)).iteration_time_s
    return scaled / plain


@pytest.mark.parametrize("gpu, preset", [("a100-sxm4-80gb", "dgx-a100"), ("h100-sxm", "dgx-h100")])
def test_llm_foundry_scales_one_gpu_iteration_between_its_factors(gpu, preset):
    """One GPU, no collectives: the iteration is other x (non-attention) + attention x
    penalty x (attention), so its ratio to the unscaled forecast lies between the two."""
    f = load_stack("llm-foundry")["factors"]
    penalty = attention_penalty(get_device(gpu).arch, "Ampere")
    lo, hi = sorted((f["other"], f["attention"] * penalty))
    assert lo * (1 - 1e-9) <= _one_gpu_ratio(gpu, preset) <= hi * (1 + 1e-9)


def test_legacy_attention_penalty_is_the_cited_utilisation_ratio():
    assert attention_penalty("Hopper", "Ampere") == pytest.approx(0.73 / 0.35)
    assert attention_penalty("Ampere", "Ampere") == 1.0
    assert attention_penalty("Blackwell", "Ampere") is None
    assert ("Hopper", "Ampere") in LEGACY_ATTENTION
    # Ampere-era attention is slower on Hopper than on its own architecture, per unit
    assert _one_gpu_ratio("h100-sxm", "dgx-h100") > _one_gpu_ratio("a100-sxm4-80gb",
                                                                    "dgx-a100")


def test_profiles_are_refused_where_nothing_was_fitted():
    with pytest.raises(InputError) as e:
        stack_time_model("llm-foundry", get_device("b200-sxm"), default_time_model())
    assert e.value.field == "stack" and "Blackwell" in str(e.value)
    assert "Hopper" in str(e.value.allowed) and "Ampere" in str(e.value.allowed)
    with pytest.raises(InputError) as e:
        stack_time_model("megatron", get_device("h100-sxm"), default_time_model())
    assert e.value.field == "stack" and list(STACKS) == ["none", "llm-foundry"]
    with pytest.raises(InputError):
        stack_overlap("megatron")


def test_shipped_profile_carries_its_provenance():
    doc = load_stack("llm-foundry")
    assert doc["schema"] == 2 and doc["attention_kernel_arch"] == "Ampere"
    assert "llm-foundry" in doc["stack"] and "@4952183" in doc["stack"]
    f = doc["factors"]
    assert f["other"] > 0 and f["attention"] > 0 and f["overlap_loss"] >= 0
    assert set(f["archs"]) == {"Ampere", "Hopper"}
    for scheme in ("heldout_model", "heldout_device"):
        assert 0 < doc["heldout_tokens_per_s_mape"][scheme]["all"] < 1


def test_overlap_loss_reaches_the_iteration():
    """The profile's overlap loss is charged on the communication hidden under compute."""
    loss = stack_overlap("llm-foundry")
    assert loss.overlap_loss == load_stack("llm-foundry")["factors"]["overlap_loss"] > 0
    job = TrainJob(model=get_model("llama-2-7b"), cluster=get_cluster("dgx-h100", 8),
                   plan=ParallelPlan(dp=8, zero_stage=3), seq_len=2048, micro_batch=2,
                   global_batch=16)
    plain = forecast_training(job)
    lossy = forecast_training(job.model_copy(update={"overlap": loss}))
    hidden = plain.breakdown["hidden_comm_s"]
    assert hidden > 0 and plain.breakdown["overlap_loss_s"] == 0.0
    assert lossy.breakdown["overlap_loss_s"] == pytest.approx(loss.overlap_loss * hidden)
    assert lossy.iteration_time_s == pytest.approx(plain.iteration_time_s
                                                   + loss.overlap_loss * hidden)


def test_schema_1_profiles_still_load(monkeypatch):
    """Durability: a profile of per-architecture factors (schema 1) prices as it did."""
    old = json.loads(SCHEMA_1.read_text())
    monkeypatch.setattr(stack_module, "load_stack", lambda name: old)
    h100 = old["factors"]["h100"]
    model = stack_time_model("llm-foundry", get_device("h100-sxm"), default_time_model())
    assert (model.other, model.attention) == (h100["other"], h100["attention"])
    assert stack_overlap("llm-foundry") == CommOverlap()
    with pytest.raises(InputError):
        stack_time_model("llm-foundry", get_device("b200-sxm"), default_time_model())
