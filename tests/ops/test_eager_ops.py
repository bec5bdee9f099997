import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.errors import InputError
from perfcast.ops import eager_ops
from perfcast.specs import ParallelPlan, Precision, get_model

FP32 = Precision.uniform("fp32")
MODELS = ["gpt2", "bert-large", "opt-1.3b", "llama-2-7b", "switch-xl4", "mixtral-8x7b"]


def _launches(ops, kernel):
    names = ops["op"].str.split(":").str[0]
    return int(ops.loc[names == kernel, "count"].sum())


def test_gpt2_layer_launches_what_hf_eager_launches():
    ops = eager_ops(get_model("gpt2"), 1, 128, precision=FP32)
    layers = 12
    assert _launches(ops, "linear") == 4 * layers + 1  # c_attn, c_proj, c_fc, c_proj; lm_head
    assert _launches(ops, "bmm") == 2 * layers
    assert _launches(ops, "tanh") == layers  # one of gelu_new's eight kernels
    assert _launches(ops, "ln") == 2 * layers + 1
    assert _launches(ops, "dropout") == 0  # eval mode


def test_gemm_flops_match_the_parameter_count():
    """Forward GEMM FLOPs = 2 x tokens x (non-embedding params + lm_head) + attention."""
    m = get_model("gpt2")
    b, s = 2, 256
    ops = eager_ops(m, b, s, precision=FP32)
    gemm = ops[ops["family"] == "gemm"]
    flops = float((gemm["flops"] * gemm["count"]).sum())
    attn = 2 * 2 * b * m.num_heads * s * s * m.head_dim * m.num_layers
    weights = m.num_layers * 12 * m.hidden_size**2 + m.vocab_size * m.hidden_size
    assert flops == pytest.approx(2 * b * s * weights + attn, rel=0.01)


@pytest.mark.parametrize("name", MODELS)
def test_every_architecture_builds_forward_training_and_fused(name):
    m = get_model(name)
    fwd = eager_ops(m, 1, 64, precision=FP32)
    train = eager_ops(m, 1, 64, "training", FP32)
    fused = eager_ops(m, 1, 64, precision=FP32, fused=True)
    assert (train["phase"] == "backward").any() and not (fwd["phase"] == "backward").any()
    bwd = train[train["phase"] == "backward"]
    assert (bwd["flops"] * bwd["count"]).sum() > 1.9 * (fwd["flops"] * fwd["count"]).sum()
    assert fused["count"].sum() <= fwd["count"].sum()
    assert (fused["flops"] * fused["count"]).sum() == pytest.approx(
        (fwd["flops"] * fwd["count"]).sum())
    moved = lambda o: float(((o["bytes_read"] + o["bytes_written"]) * o["count"]).sum())  # noqa: E731
    assert moved(fused) <= moved(fwd)


def test_fusion_merges_gelu_and_softmax_chains():
    m = get_model("gpt2")
    fused = eager_ops(m, 1, 128, precision=FP32, fused=True)
    ops = set(fused["op"])
    assert "gelu:fused_act" in ops and "softmax:fused_softmax" in ops
    assert _launches(fused, "tanh") == 0


def test_tensor_parallel_shards_and_all_reduces():
    m = get_model("gpt2-large")
    one = eager_ops(m, 1, 128, precision=FP32)
    four = eager_ops(m, 1, 128, precision=FP32, plan=ParallelPlan(tp=4))
    assert int(four.loc[four["family"] == "allreduce", "count"].sum()) == 2 * m.num_layers
    g1, g4 = (o[o["family"] == "gemm"] for o in (one, four))
    assert (g4["flops"] * g4["count"]).sum() == pytest.approx(
        (g1["flops"] * g1["count"]).sum() / 4, rel=0.01)


@settings(max_examples=20, deadline=None)
@given(batch=st.integers(1, 8), seq=st.integers(1, 512))
def test_work_grows_with_batch_and_sequence(batch, seq):
    m = get_model("bert-large")
    a = eager_ops(m, batch, seq, precision=FP32)
    b = eager_ops(m, batch + 1, seq, precision=FP32)
    work = lambda o: float((o["flops"] * o["count"]).sum())  # noqa: E731
    assert work(b) > work(a)


@pytest.mark.parametrize("kwargs, field", [({"batch_size": 0}, "batch"),
                                           ({"seq_len": 4096}, "seq_len"),
                                           ({"mode": "backward"}, "mode")])
def test_bad_input_names_the_field(kwargs, field):
    args = {"batch_size": 1, "seq_len": 128, **kwargs}
    with pytest.raises(InputError, match=field):
        eager_ops(get_model("gpt2"), args.pop("batch_size"), args.pop("seq_len"), **args)


def test_recompute_reruns_every_layer_forward_once():
    m = get_model("gpt2")
    plain = eager_ops(m, 1, 128, "training", FP32)
    again = eager_ops(m, 1, 128, "training", FP32, recompute=True)
    extra = again[again["phase"] == "recompute"]
    fwd_layers = plain[(plain["phase"] == "forward") & (plain["layer"] == "layer")]
    assert (extra["flops"] * extra["count"]).sum() == pytest.approx(
        (fwd_layers["flops"] * fwd_layers["count"]).sum())
    with pytest.raises(InputError, match="recompute"):
        eager_ops(m, 1, 128, "forward", FP32, recompute=True)


def test_optimizer_step_is_its_own_phase():
    m = get_model("gpt2")
    ops = eager_ops(m, 1, 128, "training", FP32, optimizer="adam")
    opt = ops[ops["phase"] == "optimizer"]
    assert len(opt) == 1
    assert float(opt["bytes_read"].iloc[0] + opt["bytes_written"].iloc[0]) == pytest.approx(
        28 * m.total_params())
    with pytest.raises(InputError, match="optimizer"):
        eager_ops(m, 1, 128, "forward", FP32, optimizer="adam")
    with pytest.raises(InputError, match="optimizer"):
        eager_ops(m, 1, 128, "training", FP32, optimizer="lamb")
