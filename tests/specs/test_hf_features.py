"""Configs are read by their features: layer patterns, hybrid and sparse mixers, MoE layer
rules, and strictness (null or missing needed fields, unknown model_types) named by field."""

import pytest

from perfcast.errors import InputError
from perfcast.specs import ModelSpec

BASE = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 8,
        "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 512,
        "vocab_size": 1000, "hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 1e4}


def spec(**changes):
    return ModelSpec.from_hf_config({**BASE, **changes}, "m")


def test_plain_llama_has_no_pattern():
    m = spec()
    assert m.layer_mixers is None and m.mixers() == ("full",) * 8
    assert m.layer_groups() == [("full", "dense", 8)] and m.inferred == ()


def test_layer_types_alternate_sliding_and_full_with_sinks():
    types = ["sliding_attention", "full_attention"] * 4
    m = spec(model_type="gpt_oss", layer_types=types, sliding_window=128,
             num_local_experts=16, num_experts_per_tok=4)
    assert m.mixers() == ("sliding", "full") * 4 and m.sliding_window == 128
    assert m.attention_sinks and m.uniform_window is None
    assert m.num_moe_layers == 8


def test_gemma_patterns():
    g2 = spec(model_type="gemma2", sliding_window=64)
    assert g2.mixers()[:2] == ("sliding", "full") and g2.tied_embeddings
    g3 = spec(model_type="gemma3_text", sliding_window=64, sliding_window_pattern=4)
    assert g3.mixers() == ("sliding",) * 3 + ("full",) + ("sliding",) * 3 + ("full",)


def test_mistral_all_sliding_stays_uniform():
    m = spec(model_type="mistral", sliding_window=64)
    assert m.layer_mixers is None and m.uniform_window == 64


def test_qwen3_next_hybrid_reads_gated_deltanet():
    m = spec(model_type="qwen3_next", full_attention_interval=4, linear_num_key_heads=4,
             linear_key_head_dim=32, linear_num_value_heads=8, linear_value_head_dim=32,
             linear_conv_kernel_dim=4, num_experts=8, num_experts_per_tok=2,
             moe_intermediate_size=128, shared_expert_intermediate_size=256)
    assert m.mixers().count("linear") == 6 and m.mixers()[3] == "full"
    assert m.linear_mixer.kind == "gated-deltanet" and m.linear_mixer.state_elements == 8 * 32 * 32
    assert m.num_attention_layers == 2
    assert m.shared_expert_width() == 256


def test_nemotron_h_pattern_and_its_errors():
    m = spec(model_type="nemotron_h", hybrid_override_pattern="M-M*-M-", num_hidden_layers=7,
             mamba_num_heads=8, mamba_head_dim=32, n_groups=2, ssm_state_size=16,
             hidden_act="relu2")
    assert m.mixers() == ("mamba", "none", "mamba", "full", "none", "mamba", "none")
    assert m.ffns() == ("none", "dense", "none", "none", "dense", "none", "dense")
    assert not m.gated_mlp and m.linear_mixer.kind == "mamba2"
    with pytest.raises(InputError) as err:
        spec(model_type="nemotron_h", hybrid_override_pattern="M-X", mamba_num_heads=8)
    assert err.value.field == "model_config.hybrid_override_pattern"


def test_jamba_periods():
    m = spec(model_type="jamba", attn_layer_period=4, attn_layer_offset=2,
             expert_layer_period=2, expert_layer_offset=1, num_experts=4,
             num_experts_per_tok=2, mamba_d_state=16, mamba_d_conv=4, mamba_expand=2)
    assert [i for i, x in enumerate(m.mixers()) if x == "full"] == [2, 6]
    assert [i for i in range(8) if m.is_moe_layer(i)] == [1, 3, 5, 7]


def test_dsa_sparse_attention_and_deepseek_rule():
    m = spec(model_type="deepseek_v32", index_topk=64, index_n_heads=4, index_head_dim=32,
             n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=64,
             first_k_dense_replace=2, n_shared_experts=1)
    assert set(m.mixers()) == {"sparse"} and m.window_of("sparse") == 64
    assert [m.is_moe_layer(i) for i in range(4)] == [False, False, True, True]


def test_qwen_moe_mlp_only_layers_and_step():
    m = spec(model_type="qwen2_moe", num_experts=4, num_experts_per_tok=2,
             moe_intermediate_size=64, decoder_sparse_step=2, mlp_only_layers=[3])
    assert [i for i in range(8) if m.is_moe_layer(i)] == [1, 5, 7]


@pytest.mark.parametrize("key", ["intermediate_size", "vocab_size", "hidden_size"])
def test_null_needed_field_is_named(key):
    with pytest.raises(InputError) as err:
        spec(**{key: None})
    assert err.value.field == f"model_config.{key}" and "null" in str(err.value)


def test_unknown_type_is_read_from_its_keys_and_says_what_it_inferred():
    m = spec(model_type="brand_new_lm")
    assert m.gated_mlp and m.norm == "rmsnorm" and m.position == "rope"
    assert any("gated MLP" in note for note in m.inferred)
    assert any("untied" in note for note in m.inferred)


@pytest.mark.parametrize("drop, field", [("hidden_act", "model_config.hidden_act"),
                                         ("rms_norm_eps", "model_config.rms_norm_eps"),
                                         ("rope_theta", "model_config.rope_theta")])
def test_unknown_type_missing_a_feature_is_refused_by_name(drop, field):
    config = {**BASE, "model_type": "brand_new_lm"}
    del config[drop]
    with pytest.raises(InputError) as err:
        ModelSpec.from_hf_config(config, "m")
    assert err.value.field == field


def test_known_unmodelled_architecture_is_refused_not_priced_as_llama():
    with pytest.raises(InputError) as err:
        spec(model_type="phi3small", blocksparse_block_size=64)
    assert err.value.field == "model_config.blocksparse_block_size"


def test_params_count_each_layer_kind():
    dense = spec()
    hybrid = spec(model_type="nemotron_h", hybrid_override_pattern="*-*-*-*-",
                  mamba_num_heads=8, mamba_head_dim=32, n_groups=1, ssm_state_size=16,
                  hidden_act="relu2")
    # 4 attention blocks + 4 plain MLP blocks == 4 llama-like layers without gating
    plain = spec(num_hidden_layers=4, hidden_act="gelu", model_type="starcoder2")
    assert hybrid.total_params() - hybrid.embedding_params() - hybrid.lm_head_params() == (
        plain.total_params() - plain.embedding_params() - plain.lm_head_params())
    assert dense.total_params() > plain.total_params()
