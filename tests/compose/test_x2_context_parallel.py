"""SCENARIOS.md X2: Llama-3-8B, 128K-token prompt, context parallel CP4 on 4xH100 (TTFT,
memory), through `forecast_inference(plan=ParallelPlan(cp=...))`."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.comm import RingAlphaBeta
from perfcast.compose import forecast_inference, host_overhead_s, step_time
from perfcast.errors import InputError
from perfcast.kernels import PhysicsModel, RooflineModel, shipped_calibration
from perfcast.ops import Batch, step_ops
from perfcast.specs import ParallelPlan, cluster_for, get_device, get_model

PROMPT = 131072  # 128K tokens
# Llama-3(.1)-8B: 32 layers, 8 KV heads of 128, bf16 KV -> K and V bytes per token per layer.
KV_TOKEN_LAYER_BYTES = 2 * 8 * 128 * 2


@pytest.fixture(scope="module")
def llama8b():
    return get_model("llama-3.1-8b")


@pytest.fixture(scope="module")
def h100x4():
    return cluster_for(get_device("h100-sxm"), 4)


@pytest.fixture(scope="module")
def calibrated():
    return PhysicsModel(shipped_calibration())


def _run(model, box, cp, prompt=PROMPT, output=4, **kw):
    return forecast_inference(model, box, prompt_tokens=prompt, output_tokens=output,
                              plan=ParallelPlan(cp=cp), **kw)


def test_cp1_is_the_plain_forecast(llama8b, h100x4):
    plain = forecast_inference(llama8b, h100x4, prompt_tokens=4096, output_tokens=8)
    cp1 = _run(llama8b, h100x4, 1, prompt=4096, output=8)
    assert (cp1.ttft_s, cp1.tpot_s, cp1.e2e_s) == (plain.ttft_s, plain.tpot_s, plain.e2e_s)
    assert cp1.memory == plain.memory and cp1.context_parallel is None
    assert cp1.breakdown().equals(plain.breakdown())
    direct = step_time(step_ops(llama8b, Batch.prefill(1, 4096)), h100x4,
                       host_s=host_overhead_s("vllm-v0", 1, 1))
    assert cp1.ttft_s == direct.time_s  # the prefill step as composed before CP existed


def test_x2_cp4_ttft_between_a_quarter_and_all_of_cp1(llama8b, h100x4):
    """With a kernel model linear in work (the roofline): the calibrated model prices a
    131k-token attention at a lower efficiency than four 32k blocks, so cp=4 can be more
    than 4x faster there."""
    roof = RooflineModel()
    one, four = _run(llama8b, h100x4, 1, time_model=roof), _run(llama8b, h100x4, 4,
                                                                time_model=roof)
    assert 0.25 * one.ttft_s <= four.ttft_s < one.ttft_s
    # each rank: 1/4 of the linear-layer FLOPs and of the causal attention pairs
    fl1, fl4 = (f.prefill.ops.eval("flops * count").sum() for f in (one, four))
    assert fl4 == pytest.approx(fl1 / 4, rel=1e-3)


def test_x2_memory_per_gpu(llama8b, h100x4):
    one, four = _run(llama8b, h100x4, 1), _run(llama8b, h100x4, 4)
    assert four.memory.weights_bytes == one.memory.weights_bytes  # replicated without TP
    assert four.memory.kv_cache_bytes == one.memory.kv_cache_bytes / 4
    # 32 layers x 4 KB per token x (32,768 prompt + 1 of the 4 output tokens) per GPU
    assert four.memory.kv_cache_bytes == 32 * KV_TOKEN_LAYER_BYTES * (32768 + 1)
    ring_buffers = 2 * 32768 * KV_TOKEN_LAYER_BYTES
    assert four.memory.activation_bytes - ring_buffers < one.memory.activation_bytes / 3.9


def test_x2_kv_ring_traffic_per_rank_by_hand(llama8b, h100x4):
    cp = _run(llama8b, h100x4, 4, comm_model=RingAlphaBeta()).context_parallel
    assert cp.cp == 4 and cp.tokens_per_rank == 32768
    assert cp.kv_hop_bytes == 32768 * KV_TOKEN_LAYER_BYTES == 134_217_728
    assert cp.kv_ring_bytes == 3 * 32 * 134_217_728  # cp - 1 hops x 32 layers: 12.9 GB
    link = h100x4.intra_node  # one send/recv per hop over NVLink (alpha-beta)
    hop_s = (link.collective_base_s + link.latency_s
             + 134_217_728 / (link.bandwidth_bps * link.bus_efficiency))
    assert cp.ring_s == pytest.approx(3 * 32 * hop_s, rel=1e-12)
    assert cp.ring_exposed_s == 0.0  # 0.35 ms hops under ~20 ms of attention per step


def test_ring_exposure_is_what_outlasts_attention(llama8b, h100x4):
    """Short prompts: hops are latency-bound and outlast the tiny attention blocks."""
    f = _run(llama8b, h100x4, 4, prompt=64, output=1)
    cp, ops = f.context_parallel, f.prefill.ops
    assert 0 < cp.ring_exposed_s <= cp.ring_s
    hop_s = cp.ring_s / (3 * 32)
    attn = ops[ops["family"] == "attn_prefill"]
    expected = sum(c * 3 * max(hop_s - t / 4, 0.0) for t, c in zip(
        attn["time_s"], attn["count"], strict=True))
    assert cp.ring_exposed_s == pytest.approx(expected, rel=1e-12)
    others = ops.loc[ops["op"] != "cp_kv_ring_exposed", "total_s"].sum()
    assert f.ttft_s == pytest.approx(others + f.prefill.host_s + cp.ring_exposed_s, rel=1e-12)


def test_decode_attends_a_shard_and_gathers_partials(llama8b, h100x4):
    f = _run(llama8b, h100x4, 4, prompt=8192, output=3)  # one decode step at context 8194
    ops = f.decode.ops
    assert ops.loc[ops["family"] == "attn_decode", "n"].item() == math.ceil(8194 / 4)
    gather = ops[ops["op"] == "cp_attn_combine"]
    # 4 ranks x 32 heads x (128 bf16 outputs + one fp32 log-sum-exp) per layer
    assert gather["m"].item() == 4 * 32 * (128 * 2 + 4) and gather["count"].item() == 32
    assert f.context_parallel.decode_combine_s == pytest.approx(gather["total_s"].item())
    assert f.tpot_s < _run(llama8b, h100x4, 1, prompt=8192, output=3).tpot_s * 1.2


def test_calibrated_kernels_also_speed_up(llama8b, h100x4, calibrated):
    times = [_run(llama8b, h100x4, cp, output=1, time_model=calibrated).ttft_s
             for cp in (1, 2, 4)]
    assert times[0] > times[1] > times[2]


@settings(max_examples=4, deadline=None)
@given(prompt=st.integers(32768, 131072))
def test_ttft_non_increasing_in_cp_for_long_prompts(llama8b, prompt):
    box = cluster_for(get_device("h100-sxm"), 8)
    ttft = [_run(llama8b, box, cp, prompt=prompt, output=1).ttft_s for cp in (1, 2, 4, 8)]
    assert all(a >= b for a, b in zip(ttft[:-1], ttft[1:], strict=True)), ttft


def test_llama3_8b_beyond_its_trained_positions_is_priced_with_a_note(h100x4):
    old, new = get_model("llama-3-8b"), get_model("llama-3.1-8b")
    a, b = _run(old, h100x4, 4, output=0), _run(new, h100x4, 4, output=0)
    assert a.ttft_s == b.ttft_s  # same shapes: Llama-3.1 only extends the trained context
    assert any("max_position_embeddings (8192)" in n for n in a.notes)
    assert not b.notes


def test_cp_refusals(h100x4):
    with pytest.raises(InputError) as err:
        _run(get_model("llama-3.1-8b"), h100x4, 16)  # 16 GPUs asked of an 8-GPU node
    assert err.value.field == "cp"
    with pytest.raises(InputError) as err:
        _run(get_model("bert-large"), h100x4, 2, prompt=256, output=0)
    assert err.value.field == "cp"
