"""`eager_ops` for the stack users run: SDPA attention, decode steps, last-token logits."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.errors import InputError
from perfcast.ops import attended_keys, eager_ops
from perfcast.specs import Precision, get_model

BF16 = Precision.uniform("bf16")
LLAMA = get_model("llama-2-7b")


def _kernels(ops) -> int:
    return int(ops["count"].sum())


def _family(ops, family):
    return ops[ops["family"] == family]


def test_sdpa_is_one_attention_kernel_per_layer_with_no_scores_chain():
    legacy = eager_ops(LLAMA, 1, 8192, precision=BF16)
    sdpa = eager_ops(LLAMA, 1, 8192, precision=BF16, attention="sdpa")
    attn = _family(sdpa, "attn_prefill")
    assert _kernels(attn) == LLAMA.num_layers
    assert not sdpa["op"].str.startswith(("bmm:", "softmax:", "mulu:scale")).any()
    assert _kernels(sdpa) < _kernels(legacy)
    # the materialised s x s scores are gone: far fewer bytes moved
    moved = lambda o: ((o["bytes_read"] + o["bytes_written"]) * o["count"]).sum()  # noqa: E731
    assert moved(sdpa) < 0.5 * moved(legacy)


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 8), seq=st.integers(1, 4096))
def test_sdpa_flops_are_the_causal_pair_count(batch, seq):
    ops = eager_ops(LLAMA, batch, seq, precision=BF16, attention="sdpa")
    row = _family(ops, "attn_prefill").iloc[0]
    pairs = batch * float(attended_keys([seq], [0], None)[0])
    d, h = LLAMA.head_dim, LLAMA.num_heads
    assert row["flops"] == pytest.approx(2 * h * 2 * d * pairs)
    assert pairs == pytest.approx(batch * seq * (seq + 1) / 2)
    assert (row["b"], row["m"], row["k"]) == (batch * h, seq, d)


def test_decode_reads_the_whole_cache_and_copies_it():
    ctx, batch = 512, 4
    ops = eager_ops(LLAMA, batch, 1, "decode", BF16, attention="sdpa", context=ctx)
    attn = _family(ops, "attn_decode").iloc[0]
    kv_bytes = batch * (ctx + 1) * 2 * LLAMA.num_kv_heads * LLAMA.head_dim * 2
    assert attn["bytes_read"] >= kv_bytes
    assert attn["m"] == 1 and attn["n"] == ctx + 1
    cat = ops[ops["op"].str.startswith("copy:cache_cat")]
    assert _kernels(cat) == 2 * LLAMA.num_layers  # torch.cat of K and of V per layer
    assert cat["bytes_read"].sum() == pytest.approx(kv_bytes)
    gemm = _family(ops, "gemm")
    assert (gemm["m"] == batch).all()  # projections and lm_head over the new tokens only
    legacy = eager_ops(LLAMA, batch, 1, "decode", BF16, context=ctx)
    scores = legacy[legacy["op"] == "bmm:scores"].iloc[0]
    assert (scores["m"], scores["n"]) == (1, ctx + 1)
    assert _kernels(legacy) > _kernels(ops)


def test_last_token_logits_price_the_lm_head_for_one_row_per_sequence():
    ops = eager_ops(LLAMA, 3, 256, precision=BF16, attention="sdpa", logits="last")
    head = ops[ops["op"] == "linear:lm_head"].iloc[0]
    assert head["m"] == 3
    full = eager_ops(LLAMA, 3, 256, precision=BF16, attention="sdpa")
    assert full[full["op"] == "linear:lm_head"].iloc[0]["m"] == 3 * 256


def test_sdpa_training_gets_the_flash_backward():
    ops = eager_ops(LLAMA, 1, 1024, "training", BF16, attention="sdpa")
    attn = _family(ops, "attn_prefill")
    fwd = attn[attn["phase"] == "forward"].iloc[0]
    bwd = attn[attn["phase"] == "backward"].iloc[0]
    assert bwd["flops"] == pytest.approx(2.5 * fwd["flops"])
    assert bwd["bytes_written"] == pytest.approx(fwd["bytes_read"])  # dQ, dK, dV


def test_legacy_is_the_default_and_unchanged():
    """Pinned: llama-2-7b 1x512 bf16, legacy eager (what perfcast step priced before
    stacks): 1386 launches, 53 rows (1192 and 45 before the bf16 RMSNorm's two casts and
    rotate_half's negation, 6 more kernels a layer: tests/ops/test_eager_hf_kernels.py)."""
    ops = eager_ops(LLAMA, 1, 512, precision=BF16)
    assert _kernels(ops) == 1386 and len(ops) == 53
    assert ops.equals(eager_ops(LLAMA, 1, 512, precision=BF16, attention="eager"))


def test_models_without_sdpa_keep_eager_attention():
    m = get_model("switch-xl4")
    assert eager_ops(m, 1, 64, attention="sdpa").equals(eager_ops(m, 1, 64))


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"mode": "decode"}, "context"),
    ({"context": 8}, "context"),
    ({"mode": "decode", "context": 8, "seq_len": 4}, "seq_len"),
    ({"attention": "flash"}, "attention"),
    ({"logits": "first"}, "logits"),
])
def test_bad_combinations_name_the_field(kwargs, field):
    args = {"model": LLAMA, "batch_size": 1, "seq_len": 1, **kwargs}
    with pytest.raises(InputError, match=field):
        eager_ops(**args)


def test_decode_needs_a_decoder_only_model():
    with pytest.raises(InputError, match="mode"):
        eager_ops(get_model("bert-large"), 1, 1, "decode", context=8)
