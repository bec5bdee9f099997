import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.ops import (
    Batch,
    attended_keys,
    inference_memory,
    kv_bytes_per_token,
    step_ops,
    training_ops,
)
from perfcast.specs import ParallelPlan, Precision, get_model


def _sum(ops, column, **where):
    sel = np.ones(len(ops), dtype=bool)
    for key, value in where.items():
        sel &= ops[key].to_numpy() == value
    return float((ops[column] * ops["count"])[sel].sum())


def test_forward_flops_are_2_params_tokens_plus_attention(llama7b):
    m, t = llama7b, 512
    ops = step_ops(m, Batch.prefill(1, t), all_logits=True)
    matmul_params = m.total_params() - m.embedding_params() - m.num_layers * 2 * m.hidden_size
    assert _sum(ops, "flops", family="gemm") == pytest.approx(2 * t * matmul_params, rel=1e-12)
    causal_pairs = t * (t + 1) / 2  # query i sees i + 1 keys
    expected_attn = 4 * m.num_layers * m.num_heads * m.head_dim * causal_pairs
    assert _sum(ops, "flops", family="attn_prefill") == pytest.approx(expected_attn, rel=1e-12)


def test_decode_reads_weights_and_kv_cache(llama7b):
    m, batch, ctx = llama7b, 8, 1000
    ops = step_ops(m, Batch.decode(batch, ctx))
    weights = (m.total_params() - m.embedding_params()) * 2
    gemm_bytes = _sum(ops, "bytes_read", family="gemm")
    assert gemm_bytes == pytest.approx(weights, rel=0.01)  # activations are ~0.1% of it
    kv = m.num_layers * batch * ctx * 2 * m.num_kv_heads * m.head_dim * 2
    q = m.num_layers * batch * m.num_heads * m.head_dim * 2
    assert _sum(ops, "bytes_read", family="attn_decode") == pytest.approx(kv + q)
    assert _sum(ops, "bytes_written", family="kv_write") == pytest.approx(
        m.num_layers * batch * 2 * m.kv_dim * 2)


def test_only_last_token_logits_when_serving(llama7b):
    ops = step_ops(llama7b, Batch.prefill(4, 100))
    head = ops[ops["op"] == "lm_head"].iloc[0]
    assert head["m"] == 4 and head["n"] == llama7b.vocab_size


def test_tensor_parallel_shards_flops_and_adds_allreduces(llama7b):
    batch = Batch.prefill(2, 256)
    full = step_ops(llama7b, batch)
    half = step_ops(llama7b, batch, plan=ParallelPlan(tp=2))
    assert 2 * _sum(half, "flops", family="gemm") == pytest.approx(_sum(full, "flops",
                                                                         family="gemm"))
    ar = half[half["family"] == "allreduce"]
    assert int(ar["count"].sum()) == 2 * llama7b.num_layers + 1
    assert set(ar["m"]) == {512 * llama7b.hidden_size * 2}
    assert full[full["family"] == "allreduce"].empty


def test_gqa_kv_heads_replicate_beyond_tp():
    m = get_model("llama-2-70b")  # 8 KV heads
    assert kv_bytes_per_token(m, Precision(), ParallelPlan(tp=8)) == pytest.approx(
        m.num_layers * 2 * 1 * m.head_dim * 2)
    assert kv_bytes_per_token(m, Precision(), ParallelPlan(tp=8)) == kv_bytes_per_token(
        m, Precision(), ParallelPlan(tp=16))


def test_sliding_window_caps_attention():
    pairs = attended_keys(np.array([8192.0]), np.array([0.0]), 4096)
    exact = sum(min(p + 1, 4096) for p in range(8192))
    assert pairs[0] == exact
    chunked = attended_keys(np.array([100.0]), np.array([5000.0]), 4096)
    assert chunked[0] == 100 * 4096


def test_moe_expert_flops_use_top_k():
    m = get_model("mixtral-8x7b")
    t = 1024
    ops = step_ops(m, Batch.prefill(1, t))
    experts = ops[ops["op"].str.startswith("expert_") & (ops["family"] == "gemm")]
    flops = float((experts["flops"] * experts["count"]).sum())
    assert flops == pytest.approx(2 * t * 2 * 3 * m.hidden_size * m.intermediate_size * 32)


def test_moe_decode_reads_only_hit_experts():
    m = get_model("mixtral-8x7b")
    one = step_ops(m, Batch.decode(1, 100))
    many = step_ops(m, Batch.decode(64, 100))
    up = "expert_up_proj"
    b1 = one[one["op"] == up]["bytes_read"].iloc[0]
    b64 = many[many["op"] == up]["bytes_read"].iloc[0]
    per_expert = 2 * m.intermediate_size * m.hidden_size * 2
    assert b1 == pytest.approx(2 * per_expert, rel=0.01)  # top-2 of 8
    assert b64 == pytest.approx(8 * per_expert, rel=0.01)  # all experts hit


def test_expert_parallel_adds_all_to_all():
    m = get_model("mixtral-8x7b")
    ops = step_ops(m, Batch.prefill(1, 256), plan=ParallelPlan(ep=8))
    a2a = ops[ops["family"] == "alltoall"]
    assert int(a2a["count"].sum()) == 2 * 32 and set(a2a["n"]) == {8}


def test_mla_decode_reads_latent_cache():
    m = get_model("deepseek-v3")
    batch, ctx = 4, 2048
    ops = step_ops(m, Batch.decode(batch, ctx), Precision(kv_cache="fp8", weights="bf16"))
    attn = ops[ops["family"] == "attn_decode"]
    kv_read = float((attn["bytes_read"] * attn["count"]).sum())
    latent = m.num_layers * batch * ctx * 576 * 1  # fp8 latent + rope key per token
    absorbed_q = m.num_layers * batch * m.num_heads * 576 * 2  # bf16 queries in latent space
    assert kv_read == pytest.approx(latent + absorbed_q)


def test_encoder_only_has_no_kv_cache_and_full_attention():
    bert = get_model("bert-large")
    ops = step_ops(bert, Batch.prefill(1, 128))
    assert "kv_write" not in set(ops["family"])
    expected = 4 * bert.num_layers * bert.num_heads * bert.head_dim * 128 * 128
    assert _sum(ops, "flops", family="attn_prefill") == pytest.approx(expected)


def test_encoder_decoder_runs_encoder_in_prefill_only():
    switch = get_model("switch-xl4")
    pre = step_ops(switch, Batch.prefill(1, 64))
    dec = step_ops(switch, Batch.decode(1, 5, encoder_tokens=64))
    assert pre["layer"].str.startswith("encoder_").any()
    assert not dec["layer"].str.startswith("encoder_").any()
    assert (dec["op"] == "cross_attn").any()


def test_training_is_about_three_times_forward(llama7b):
    ops = training_ops(llama7b, 1, 1024)
    fwd = _sum(ops, "flops", phase="forward")
    bwd = _sum(ops, "flops", phase="backward")
    assert 1.95 < bwd / fwd < 2.1
    assert (ops["phase"] == "optimizer").sum() == 1


def test_memory_footprint_of_llama7b(llama7b):
    mem = inference_memory(llama7b, Precision(), ParallelPlan(), batch_size=2, max_context=1000,
                           prefill_tokens=500)
    assert mem.weights_bytes == pytest.approx(llama7b.total_params() * 2)
    assert mem.kv_cache_bytes == pytest.approx(2 * 1000 * 32 * 2 * 4096 * 2)
    int4 = inference_memory(llama7b, Precision(weights="int4"), ParallelPlan(), 1, 10, 10)
    assert int4.weights_bytes < 0.35 * mem.weights_bytes


@settings(max_examples=40, deadline=None)
@given(t1=st.integers(1, 4096), extra=st.integers(1, 4096), batch=st.integers(1, 16))
def test_flops_and_bytes_monotone_in_tokens(llama7b, t1, extra, batch):
    small = step_ops(llama7b, Batch.prefill(batch, t1))
    large = step_ops(llama7b, Batch.prefill(batch, t1 + extra))
    for col in ("flops", "bytes_read", "bytes_written"):
        assert _sum(large, col) > _sum(small, col)
