import json

import numpy as np
import pandas as pd
import pytest

from perfcast.compose import (
    chrome_trace,
    data_parallel_step,
    kernel_sequence,
    pipeline_step,
    step_time,
    step_timeline,
)
from perfcast.kernels import PhysicsModel, shipped_calibration, step_interval
from perfcast.ops import eager_ops
from perfcast.specs import Precision, cluster_for, get_device, get_model

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
