"""Memory per GPU and the FLOP convention, against hand-derived sizes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.specs import ParallelPlan, Precision, get_cluster, get_model
from perfcast.train import TrainJob, activation_bytes_per_layer, forecast_training

GPT3 = get_model("gpt3-175b")


def _per_layer(tp, sp, tokens=2048):
    parts = activation_bytes_per_layer(GPT3, Precision(), tokens, tp, sp)
    return {k: float(v) for k, v in parts.items()}


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_korthikanti_activation_sizes_for_gpt3(tp):
    """Korthikanti et al. 2022 (section 4.1) for GPT-3's shape in 16-bit: sbh(10 + 24/t)
    without SP, 34 sbh / t with SP; FlashAttention keeps softmax statistics (4 B per head and
    token) instead of the 5as/h score terms."""
    s, h = 2048, GPT3.hidden_size
    plain, sp = _per_layer(tp, False), _per_layer(tp, True)
    assert plain["replicated"] + plain["sharded"] == pytest.approx(s * h * (10 + 24 / tp))
    assert sp["replicated"] + sp["sharded"] == pytest.approx(s * h * 34 / tp)
    assert plain["lse"] == pytest.approx(4 * GPT3.num_heads / tp * s)


@pytest.fixture(scope="module")
def llama7b_job():
    def make(**kw):
        base = {"model": get_model("llama-2-7b"), "cluster": get_cluster("dgx-a100", 16),
                "plan": ParallelPlan(dp=16), "seq_len": 2048, "micro_batch": 1,
                "global_batch": 16}
        plan = kw.pop("plan", None)
        if plan is not None:
            base["plan"] = plan
        return TrainJob(**{**base, **kw})
    return make


def test_model_states_follow_the_zero_paper(llama7b_job):
    """Rajbhandari et al. 2020: 2 + 2 + 12 bytes per parameter; ZeRO-1 shards the 12,
    ZeRO-2 also the gradients' 2, ZeRO-3 also the weights' 2, over the 16 DP ranks."""
    n = get_model("llama-2-7b").total_params()
    mem = {z: forecast_training(llama7b_job(plan=ParallelPlan(dp=16, zero_stage=z))).memory
           for z in range(4)}
    assert mem[0]["weights"] == pytest.approx(2 * n)
    assert mem[0]["gradients"] == pytest.approx(2 * n)
    assert mem[0]["optimizer"] == pytest.approx(12 * n)
    assert mem[1]["optimizer"] == pytest.approx(12 * n / 16)
    assert mem[2]["gradients"] == pytest.approx(2 * n / 16)
    assert mem[3]["weights"] == pytest.approx(2 * n / 16)


@settings(max_examples=12, deadline=None)
@given(stage=st.integers(0, 2), dp=st.sampled_from([2, 4, 16]),
       recompute=st.sampled_from(["none", "selective", "full"]))
def test_memory_never_grows_with_the_zero_stage(llama7b_job, stage, dp, recompute):
    def total(z):
        return forecast_training(llama7b_job(plan=ParallelPlan(dp=dp, zero_stage=z),
                                             global_batch=dp, recompute=recompute)
                                 ).memory_per_gpu_bytes

    assert total(stage + 1) < total(stage)


def test_recomputation_trades_time_for_memory(llama7b_job):
    runs = {rc: forecast_training(llama7b_job(recompute=rc)) for rc in
            ("none", "selective", "full")}
    assert runs["full"].memory["activations"] < runs["selective"].memory["activations"] \
        <= runs["none"].memory["activations"]
    assert runs["none"].iteration_time_s < runs["selective"].iteration_time_s \
        < runs["full"].iteration_time_s
    assert runs["full"].hfu > runs["full"].mfu
    assert runs["none"].hfu == pytest.approx(runs["none"].mfu)
    assert runs["full"].breakdown["recompute_s"] > 0 == runs["none"].breakdown["recompute_s"]


def test_model_flops_match_megatron_for_gpt3():
    """Narayanan et al. 2021, eq. (3): 72 B s l h^2 (1 + s / 6h + V / 12hl) per iteration."""
    from perfcast.train._flops import model_flops

    b, s, ll, h, v = 1536, 2048, GPT3.num_layers, GPT3.hidden_size, GPT3.vocab_size
    expected = 72 * b * s * ll * h**2 * (1 + s / (6 * h) + v / (12 * h * ll))
    assert model_flops(GPT3, b * s, s) == pytest.approx(expected, rel=1e-12)


def test_fits_compares_with_the_device_capacity(llama7b_job):
    roomy = forecast_training(llama7b_job(plan=ParallelPlan(dp=16, zero_stage=3)))
    crammed = forecast_training(llama7b_job(micro_batch=16, global_batch=256))
    assert roomy.fits and roomy.memory_per_gpu_bytes < roomy.capacity_bytes
    assert not crammed.fits and "GB per GPU" in crammed.notes[0]
    assert crammed.memory_per_gpu_bytes == pytest.approx(sum(crammed.memory.values()))
    assert np.isfinite(crammed.iteration_time_s)
