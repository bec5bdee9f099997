import pytest
from pydantic import ValidationError

from perfcast.errors import InputError
from perfcast.specs import DType, ParallelPlan, Precision, get_model, parse_dtype


def test_llama2_7b_shapes(llama7b):
    m = llama7b
    assert (m.hidden_size, m.num_layers, m.num_heads, m.num_kv_heads) == (4096, 32, 32, 32)
    assert m.gated_mlp and m.norm == "rmsnorm" and m.position == "rope"
    assert m.intermediate_size == 11008 and not m.tied_embeddings


def test_gqa_moe_mla_and_tied():
    assert get_model("llama-2-70b").num_kv_heads == 8
    mixtral = get_model("mixtral-8x7b")
    assert mixtral.moe.num_experts == 8 and mixtral.moe.experts_per_token == 2
    assert mixtral.num_moe_layers == 32
    ds = get_model("deepseek-v3")
    assert ds.mla.kv_lora_rank == 512 and ds.moe.num_shared_experts == 1
    assert ds.num_moe_layers == 58 and ds.kv_cache_elements_per_token() == 576
    assert ds.active_params() / 1e9 == pytest.approx(37.5, rel=0.05)  # 37B activated (paper)
    assert get_model("gpt2").tied_embeddings and get_model("gpt2").position == "learned"
    q = get_model("qwen3-32b")
    assert q.head_dim == 128 and q.q_dim == 8192 and q.sliding_window is None


def test_encoder_and_encoder_decoder_kinds():
    assert get_model("bert-large").kind == "encoder"
    switch = get_model("switch-xl4")
    assert switch.kind == "encoder-decoder" and switch.moe.num_experts == 4


def test_plan_rejects_tp_not_dividing_heads(llama7b):
    with pytest.raises(InputError) as err:
        ParallelPlan(tp=3).check(llama7b)
    assert err.value.field == "tp" and "1, 2, 4, 8, 16, 32" in str(err.value)


def test_plan_ep_needs_experts(llama7b):
    with pytest.raises(InputError, match="ep"):
        ParallelPlan(ep=2).check(llama7b)


def test_plan_field_validation():
    with pytest.raises(ValidationError):
        ParallelPlan(tp=0)
    with pytest.raises(ValidationError):
        ParallelPlan(zero_stage=4)
    with pytest.raises(ValidationError):
        ParallelPlan(sp=True)


def test_precision_rules():
    assert Precision(weights="int4", activations="bf16").gemm_math == DType.BF16
    assert Precision.uniform("fp8").gemm_math == DType.FP8
    with pytest.raises(ValidationError, match="fp8 activations need fp8 weights"):
        Precision(weights="int4", activations="fp8")
    with pytest.raises(ValidationError):
        Precision(activations="int4")


def test_parse_dtype_names_field():
    assert parse_dtype("bfloat16") == DType.BF16
    with pytest.raises(InputError) as err:
        parse_dtype("fp12", "kv_dtype")
    assert err.value.field == "kv_dtype" and "fp8" in err.value.allowed


def test_specs_are_frozen_and_strict(a100):
    with pytest.raises(ValidationError):
        a100.sm_count = 1
    with pytest.raises(ValidationError):
        type(a100)(**a100.model_dump(), bogus=1)
    with pytest.raises(InputError) as err:
        a100.peak_flops("fp8")
    assert "bf16" in err.value.allowed
