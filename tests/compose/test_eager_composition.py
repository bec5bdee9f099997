import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.comm import default_collective_model
from perfcast.compose import (
    bucketed_reduction,
    chrome_trace,
    data_parallel_step,
    group_view,
    kernel_sequence,
    pipeline_step,
    reduction_end,
    step_time,
    step_timeline,
    step_times,
)
from perfcast.errors import InputError
from perfcast.kernels import PhysicsModel, shipped_calibration, step_interval
from perfcast.ops import eager_ops
from perfcast.specs import ParallelPlan, Precision, cluster_for, get_device, get_model

FP32 = Precision.uniform("fp32")


@pytest.fixture(scope="module")
def gpt2_step():
    ops = eager_ops(get_model("gpt2"), 1, 128, "training", FP32)
    box = cluster_for(get_device("v100-pcie-32gb"), 1)
    return step_time(ops, box, "eager", time_model=PhysicsModel(shipped_calibration()))


def test_kernel_sequence_repeats_layer_blocks():
    ops = pd.DataFrame({"layer": ["emb", "layer", "layer", "head"], "phase": ["f"] * 4,
                        "count": [1, 3, 3, 1]})
    assert kernel_sequence(ops).tolist() == [0, 1, 2, 1, 2, 1, 2, 3]


def test_timeline_ends_at_the_step_time(gpt2_step):
    tl = step_timeline(gpt2_step, "eager")
    gpu = tl[tl["track"] != "host"]
    assert len(gpu) == gpt2_step.ops["count"].sum()
    assert (gpu["start_s"] + gpu["dur_s"]).max() == pytest.approx(gpt2_step.time_s)
    starts = gpu["start_s"].to_numpy()
    assert np.all(np.diff(starts) >= 0)  # one stream: kernels never overlap


def test_chrome_trace_is_valid_json(gpt2_step):
    doc = json.loads(json.dumps(chrome_trace(step_timeline(gpt2_step, "eager"))))
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert spans and all(e["dur"] >= 0 for e in spans)
    assert {e["tid"] for e in spans} >= {1, 2}


def test_interval_brackets_the_forecast(gpt2_step):
    low, high = gpt2_step.interval_s
    assert low < gpt2_step.time_s < high


def test_correlated_errors_grow_with_n_uncorrelated_with_sqrt_n():
    one = pd.DataFrame({"family": ["gemm"], "total_s": [1.0]})
    many = pd.DataFrame({"family": ["gemm"] * 100, "total_s": [0.01] * 100})
    lo1, hi1 = step_interval(one, "roofline")
    lo2, hi2 = step_interval(many, "roofline")
    assert hi2 - lo2 < hi1 - lo1  # 100 partly independent kernels average out
    assert hi2 - lo2 > 0


def test_data_parallel_exposes_only_what_backward_cannot_hide(gpt2_step):
    box = cluster_for(get_device("a100-sxm4-40gb"), 4)
    small = data_parallel_step(gpt2_step, 1e6, box, 4)
    big = data_parallel_step(gpt2_step, 1e11, box, 4)
    assert 0 < small.exposed_comm_s <= small.comm_s
    assert big.exposed_comm_s > small.exposed_comm_s
    assert big.time_s == pytest.approx(gpt2_step.time_s + big.exposed_comm_s)


def test_pipeline_one_microbatch_is_sequential(gpt2_step):
    box = cluster_for(get_device("a100-sxm4-40gb"), 4)
    p = pipeline_step(gpt2_step, 4e6, box, 4)
    assert p.time_s > gpt2_step.time_s and p.compute_s == gpt2_step.time_s


def test_same_inputs_bit_identical(gpt2_step):
    ops = eager_ops(get_model("gpt2"), 1, 128, "training", FP32)
    box = cluster_for(get_device("v100-pcie-32gb"), 1)
    again = step_time(ops, box, "eager", time_model=PhysicsModel(shipped_calibration()))
    assert again.time_s == gpt2_step.time_s and again.interval_s == gpt2_step.interval_s


def test_inference_forecast_carries_intervals():
    from perfcast.compose import forecast_inference

    f = forecast_inference(get_model("llama-2-7b"), cluster_for(get_device("a100-sxm4-80gb"), 1),
                           prompt_tokens=512, output_tokens=64,
                           time_model=PhysicsModel(shipped_calibration()))
    iv = f.intervals_s()
    for key, value in (("ttft_s", f.ttft_s), ("tpot_s", f.tpot_s), ("e2e_s", f.e2e_s)):
        low, high = iv[key]
        assert low < value < high


def test_data_parallel_overlap_is_the_one_rule(gpt2_step):
    """exposed = max(last bucket, all buckets - backward): compute-bound, the last bucket;
    comm-bound, what outlasts backward (compose.reduction_end, the rule train uses too)."""
    box = cluster_for(get_device("a100-sxm4-40gb"), 16)
    backward = float(gpt2_step.ops.loc[gpt2_step.ops["phase"] == "backward", "total_s"].sum())
    for grad in (1e6, 1e8, 1e11):
        par = data_parallel_step(gpt2_step, grad, box, 16)
        every, last = bucketed_reduction(default_collective_model(), box, "allreduce", [grad],
                                          [16], [1])
        assert par.comm_s == pytest.approx(every[0])
        assert par.exposed_comm_s == pytest.approx(max(last[0], every[0] - backward))
        end = reduction_end(gpt2_step.time_s, gpt2_step.time_s - backward, every, last)[0]
        assert par.time_s == pytest.approx(end)


def test_a_strided_dp_group_across_nodes_pays_the_network(gpt2_step):
    """dp=2 ranks tp=8 apart on two 8-GPU nodes sit on different nodes (group_view)."""
    box = cluster_for(get_device("a100-sxm4-40gb"), 16)
    near = data_parallel_step(gpt2_step, 1e9, box, 2)
    apart = data_parallel_step(gpt2_step, 1e9, box, 2, stride=8)
    assert apart.comm_s > near.comm_s
    assert group_view(box, 2, 8).gpus_per_node == 1 and group_view(box, 2, 1) == box


def test_steps_priced_together_equal_steps_priced_alone():
    box = cluster_for(get_device("h100-sxm"), 2)
    model = PhysicsModel(shipped_calibration())
    tables = [eager_ops(get_model("gpt2"), b, 128, "training", FP32, ParallelPlan(tp=2))
              for b in (1, 4)]
    together = step_times(tables, box, "eager", time_model=model)
    for table, step in zip(tables, together, strict=True):
        alone = step_time(table, box, "eager", time_model=model)
        assert (step.time_s, step.comm_s, step.interval_s) == (alone.time_s, alone.comm_s,
                                                               alone.interval_s)
        assert step.ops["time_s"].equals(alone.ops["time_s"])
    assert step_times(tables, box, time_model=model, intervals=False)[0].interval_s is None


@settings(max_examples=20, deadline=None)
@given(st.floats(0.2, 1.0), st.floats(1.0, 5.0), st.sampled_from(["eager", "cuda-graph"]))
def test_host_spread_widens_only_the_interval(low, high, execution):
    """Another host's CPU time differs: the interval ends move by the host time of a host
    `low`/`high` times as slow, the forecast itself does not."""
    ops = eager_ops(get_model("gpt2"), 1, 16, "forward", FP32)
    box = cluster_for(get_device("h100-sxm"), 1)
    model = PhysicsModel(shipped_calibration())
    base = step_time(ops, box, execution, 1e-3, model, dispatch_s=20e-6)
    wide = step_time(ops, box, execution, 1e-3, model, dispatch_s=20e-6,
                     host_spread=(low, high))
    assert wide.time_s == base.time_s
    assert wide.interval_s[0] <= base.interval_s[0] <= base.time_s
    assert wide.interval_s[1] >= base.interval_s[1] >= base.time_s
    slow = step_time(ops, box, execution, 1e-3 * high, model, dispatch_s=20e-6 * high)
    assert wide.interval_s[1] == pytest.approx(base.interval_s[1] + slow.launch_s
                                               + slow.host_s - base.launch_s - base.host_s)


@pytest.mark.parametrize("spread", [(1.2, 2.0), (0.5, 0.9), (0.0, 1.0)])
def test_host_spread_must_bracket_one(spread):
    ops = eager_ops(get_model("gpt2"), 1, 16, "forward", FP32)
    with pytest.raises(InputError, match="host_spread"):
        step_time(ops, cluster_for(get_device("h100-sxm"), 1), "eager", host_spread=spread)
