"""MPT configs: HF MPTConfig parsing; the catalog sizes against MosaicML's benchmark counts."""

import pandas as pd
import pytest

from perfcast.specs import ModelSpec, get_model, load_model_config
from perfcast.validate import load_training_points

SIZES = ["125m", "350m", "760m", "1b", "3b", "7b", "13b", "30b", "70b"]


def _bias_and_final_norm_params(spec: ModelSpec) -> int:
    """Weights ModelSpec.total_params leaves out: every linear's and LayerNorm's bias (MPT
    with no_bias false) and the final LayerNorm (weight + bias)."""
    h, inter = spec.hidden_size, spec.intermediate_size
    per_layer = (spec.q_dim + 2 * spec.kv_dim) + h + inter + h + 2 * h  # Wqkv, out, up, down, norms
    return spec.num_layers * per_layer + 2 * h if spec.attention_bias else h


@pytest.fixture(scope="module")
def benchmark_counts() -> pd.DataFrame:
    """MosaicML's params_b per model and sequence length (the shipped copy of
    shared/data/training/llmfoundry_throughput.csv)."""
    rows = load_training_points()
    return rows[["model", "seq_len", "params_b"]].drop_duplicates()


def test_every_benchmarked_mpt_size_is_in_the_catalog(benchmark_counts):
    sizes = {m.split("-", 1)[1].lower() for m in benchmark_counts["model"].unique()}
    assert sizes == set(SIZES)
    for size in SIZES:
        assert get_model(f"llm-foundry/mpt-{size}").model_type == "mpt"


def test_params_match_mosaicml_counts_at_every_seq_len(benchmark_counts):
    """MosaicML's MFU uses the model's parameter count, which grows with max_seq_len (learned
    position embeddings): ours, with the run's max_seq_len, plus biases, equals it to the CSV's
    three decimals."""
    for row in benchmark_counts.itertuples():
        spec = get_model(f"llm-foundry/{row.model.lower()}")
        spec = spec.model_copy(update={"max_position_embeddings": row.seq_len})
        full = spec.total_params() + _bias_and_final_norm_params(spec)
        assert full / 1e9 == pytest.approx(row.params_b, abs=6e-4), (row.model, row.seq_len)
        # ModelSpec's own count is short by the biases alone (the CSV rounds to 1e-3)
        gap = row.params_b - spec.total_params() / 1e9
        assert -5e-4 <= gap <= _bias_and_final_norm_params(spec) / 1e9 + 5e-4


def test_mpt_fields_from_the_yaml_definition():
    spec = get_model("mpt-13b")
    assert (spec.hidden_size, spec.num_layers, spec.num_heads, spec.head_dim) == (5120, 40, 40, 128)
    assert spec.intermediate_size == 4 * 5120 and not spec.gated_mlp
    assert spec.activation == "gelu" and spec.norm == "layernorm"
    assert spec.position == "learned" and spec.max_position_embeddings == 2048
    assert spec.tied_embeddings and spec.lm_head_params() == 0
    assert spec.attention_bias and spec.vocab_size == 50368


def test_hub_checkpoints_use_alibi_and_no_bias():
    for name, heads, published in (("mpt-7b", 32, 6.7), ("mpt-30b", 64, 29.95)):
        spec = get_model(f"mosaicml/{name}")
        assert spec.position == "relative"  # ALiBi: a bias inside attention, no embedding table
        assert not spec.attention_bias and spec.num_heads == heads
        assert spec.embedding_params() == spec.vocab_size * spec.hidden_size
        assert spec.total_params() / 1e9 == pytest.approx(published, rel=0.01)
    assert load_model_config("mpt-30b")["max_seq_len"] == 8192


@pytest.mark.parametrize("extra,field,value", [
    ({"attn_config": {"attn_type": "grouped_query_attention", "kv_n_heads": 2}},
     "num_kv_heads", 2),
    ({"attn_config": {"attn_type": "multiquery_attention"}}, "num_kv_heads", 1),
    ({"attn_config": {"rope": True}}, "position", "rope"),
    ({"learned_pos_emb": False}, "position", "relative"),
    ({"expansion_ratio": 2.5}, "intermediate_size", 160),
    ({"ffn_config": {"ffn_type": "mptglu"}}, "gated_mlp", True),
    ({"tie_word_embeddings": False}, "tied_embeddings", False),
    ({"attn_config": {"sliding_window_size": 16}}, "sliding_window", 16),
])
def test_mpt_dialect_options(extra, field, value):
    base = {"model_type": "mpt", "d_model": 64, "n_heads": 8, "n_layers": 2, "max_seq_len": 128}
    spec = ModelSpec.from_hf_config({**base, **extra}, name="tiny-mpt")
    assert getattr(spec, field) == value
    default = ModelSpec.from_hf_config(base, name="tiny-mpt")
    assert (default.vocab_size, default.position, default.num_kv_heads) == (50368, "learned", 8)
