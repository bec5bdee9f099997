"""Shipped software stacks load, validate and are named in errors."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from perfcast.errors import InputError
from perfcast.specs import AttentionBackend, GraphCapture, HostModel, Stack, get_stack, stack_names

ISSUE_STACKS = {"hf-transformers", "hf-transformers-legacy", "torch-compile", "vllm", "sglang",
                "trtllm", "megatron-core", "fsdp", "llm-foundry"}


def test_the_issue_stacks_ship():
    assert set(stack_names()) >= ISSUE_STACKS


def test_stacks_differ_where_frameworks_do():
    assert get_stack("hf-transformers").attention is AttentionBackend.SDPA
    assert get_stack("hf-transformers-legacy").attention is AttentionBackend.EAGER
    assert not get_stack("hf-transformers-legacy").attention.fused
    assert get_stack("vllm").graph_capture is GraphCapture.CUDA_GRAPHS
    assert get_stack("hf-transformers").eager and not get_stack("vllm").eager
    assert get_stack("torch-compile").fused >= {"norm", "activation"}


def test_unknown_stack_names_the_field_and_the_choices():
    with pytest.raises(InputError) as exc:
        get_stack("vlm")
    assert exc.value.field == "stack" and "vllm" in str(exc.value)


def test_old_none_stack_is_megatron_core():
    assert get_stack("none").name == "megatron-core"


def test_unknown_fusion_is_refused():
    entry = get_stack("vllm").model_dump()
    entry["fused"] = ["norm", "everything"]
    with pytest.raises(ValidationError):
        Stack.model_validate(entry)


@given(st.sampled_from(sorted(ISSUE_STACKS)))
def test_every_stack_card_names_itself(name):
    card = get_stack(name).card()
    assert card["name"] == name and card["attention"] in {a.value for a in AttentionBackend}


@pytest.mark.parametrize("spread", [(1.1, 2.0), (0.5, 0.9), (0.0, 1.5), (-1.0, 1.0)])
def test_host_spread_must_bracket_one(spread):
    with pytest.raises(ValidationError, match="spread"):
        HostModel(op_dispatch_s=1e-5, spread=spread, reference_cpu="x", provenance="y")


def test_an_old_host_entry_without_the_new_fields_still_loads():
    """Stack files written before generate_s and spread existed load with their defaults."""
    host = HostModel(op_dispatch_s=8e-6, step_s=0.0, reference_cpu="x", provenance="y")
    assert host.generate_s == 0.0 and host.spread == (1.0, 1.0)


def test_every_serving_engine_stack_has_engine_defaults_with_a_source():
    for name in stack_names():
        stack = get_stack(name)
        assert (stack.engine is not None) == stack.serving_engine, name
        if stack.engine is not None:
            assert stack.engine.provenance
            assert stack.engine.tier_for("any-gpu", 0.0).min_memory_gib == 0


def test_engine_defaults_need_a_tier_for_every_gpu():
    from perfcast.specs import EngineDefaults

    tier = {"min_memory_gib": 70, "max_batch_tokens": 8192, "max_seqs": 1024}
    with pytest.raises(ValidationError, match="min_memory_gib 0"):
        EngineDefaults(scheduler="vllm-v1", tiers=[tier], provenance="x")
    ok = EngineDefaults(scheduler="vllm-v1", provenance="x", tiers=[
        {**tier, "exclude": ["a100"]}, {**tier, "min_memory_gib": 0, "max_batch_tokens": 2048}])
    assert ok.tier_for("a100-sxm4-80gb", 80 * 2**30).max_batch_tokens == 2048
    assert ok.tier_for("h100-sxm", 80 * 2**30).max_batch_tokens == 8192
