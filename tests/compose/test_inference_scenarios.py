"""SCENARIOS.md I1.1-I1.3 and physical sanity of single-request forecasts."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.compose import forecast_inference
from perfcast.errors import InputError
from perfcast.kernels import RooflineModel
from perfcast.specs import ParallelPlan, Precision, cluster_for, get_cluster, get_device, get_model


def test_i1_1_llama7b_a100(llama7b, a100_box):
    f = forecast_inference(llama7b, a100_box, prompt_tokens=512, output_tokens=128,
                           precision=Precision.uniform("fp16"))
    weight_floor = llama7b.total_params() * 2 / 2039e9  # every decode step reads all weights
    assert f.tpot_s > weight_floor
    assert f.tpot_s < 2 * weight_floor
    prefill_floor = 2 * llama7b.total_params() * 512 / 312e12
    assert f.ttft_s > prefill_floor
    assert f.e2e_s == pytest.approx(f.ttft_s + 127 * f.tpot_s)
    assert f.breakdown()["total_s"].sum() == pytest.approx(f.e2e_s)


def test_i1_2_llama13b_h100():
    m = get_model("llama-2-13b")
    f = forecast_inference(m, cluster_for(get_device("h100-sxm")), prompt_tokens=2048,
                           output_tokens=256)
    assert f.tpot_s > m.total_params() * 2 / 3350e9
    assert f.ttft_s > 2 * m.total_params() * 2048 / 989e12


def test_i1_3_llama70b_tp4_adds_allreduce():
    m = get_model("llama-2-70b")
    box = get_cluster("dgx-a100", 4)
    f = forecast_inference(m, box, prompt_tokens=1024, output_tokens=128,
                           plan=ParallelPlan(tp=4))
    assert f.decode.comm_s > 0 and f.prefill.comm_s > 0
    assert f.tpot_s > m.total_params() * 2 / 4 / 2039e9 + f.decode.comm_s


def test_tp4_faster_per_token_than_tp2_for_70b():
    m = get_model("llama-2-70b")
    box = get_cluster("dgx-h100", 4)
    tp2 = forecast_inference(m, box, prompt_tokens=512, output_tokens=32, plan=ParallelPlan(tp=2))
    tp4 = forecast_inference(m, box, prompt_tokens=512, output_tokens=32, plan=ParallelPlan(tp=4))
    assert tp4.tpot_s < tp2.tpot_s


def test_does_not_fit_is_a_clear_error(a100_box):
    with pytest.raises(InputError) as err:
        forecast_inference(get_model("llama-2-70b"), a100_box, prompt_tokens=10, output_tokens=10)
    assert err.value.field == "memory" and "--tp" in str(err.value)


def test_negative_tokens_rejected(llama7b, a100_box):
    with pytest.raises(InputError) as err:
        forecast_inference(llama7b, a100_box, prompt_tokens=-1, output_tokens=10)
    assert err.value.field == "prompt_tokens"


def test_learned_positions_limit():
    with pytest.raises(InputError, match="learned positions"):
        forecast_inference(get_model("gpt2"), cluster_for(get_device("t4")), prompt_tokens=1000,
                           output_tokens=100, precision=Precision.uniform("fp16"))


def test_deterministic(llama7b, a100_box):
    a = forecast_inference(llama7b, a100_box, prompt_tokens=300, output_tokens=50)
    b = forecast_inference(llama7b, a100_box, prompt_tokens=300, output_tokens=50)
    assert (a.ttft_s, a.tpot_s, a.e2e_s) == (b.ttft_s, b.tpot_s, b.e2e_s)
    assert a.breakdown().equals(b.breakdown())


@settings(max_examples=25, deadline=None)
@given(prompt=st.integers(1, 3000), extra=st.integers(1, 1000), batch=st.integers(1, 8),
       more=st.integers(1, 8))
def test_monotone_in_tokens_and_batch(llama7b, a100_box, prompt, extra, batch, more):
    """More tokens or sequences never take less time, given a kernel model that is itself
    monotone (the roofline; the calibrated model's efficiency grids are not everywhere)."""

    def run(p, b):
        return forecast_inference(llama7b, a100_box, batch=b, prompt_tokens=p, output_tokens=8,
                                  time_model=RooflineModel())

    base = run(prompt, batch)
    assert run(prompt + extra, batch).ttft_s >= base.ttft_s
    assert run(prompt + extra, batch).e2e_s >= base.e2e_s
    assert run(prompt, batch + more).e2e_s >= base.e2e_s


def test_rope_context_beyond_trained_positions_is_priced_with_a_note(llama7b, a100_box):
    """Llama-2-7B was trained on 4,096 positions; RoPE has no table, so longer contexts are
    priced (as under RoPE scaling) and the forecast says so; within the limit, no note."""
    long = forecast_inference(llama7b, a100_box, prompt_tokens=6000, output_tokens=4)
    assert any("max_position_embeddings (4096)" in n for n in long.notes)
    short = forecast_inference(llama7b, a100_box, prompt_tokens=4000, output_tokens=96)
    assert not short.notes and long.ttft_s > short.ttft_s
