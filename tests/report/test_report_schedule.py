"""The simulated pipeline schedule of a training forecast, drawn and traced task by task."""

import json

import numpy as np
import pytest

from perfcast.report import pipeline_figure, training_schedule, training_trace
from perfcast.specs import ParallelPlan, PipelineSchedule, cluster_for, get_device, get_model
from perfcast.train import TrainJob

CLUSTER = cluster_for(get_device("a100-sxm4-80gb"), 8)
INLINE = ("tp", "sp", "cp", "ep_alltoall", "zero_allgather", "zero_reducescatter",
          "pp_sendrecv")


def _job(schedule="1f1b", v=1, pp=4, dp=1, zero=0, tp=1):
    return TrainJob(model=get_model("gpt2"), cluster=CLUSTER,
                    plan=ParallelPlan(pp=pp, dp=dp, tp=tp, zero_stage=zero,
                                      schedule=PipelineSchedule(schedule), virtual_stages=v),
                    seq_len=512, micro_batch=1, global_batch=8 * dp)


@pytest.fixture(scope="module", params=[("gpipe", 1), ("1f1b", 1), ("interleaved-1f1b", 2)],
                ids=lambda p: p[0])
def schedule(request):
    return training_schedule(_job(*request.param))


def test_one_task_per_stage_micro_batch_chunk_and_pass(schedule):
    t = schedule.tasks
    assert len(t) == 2 * schedule.stages * schedule.micro_batches * schedule.chunks
    keys = set(zip(t["stage"], t["micro_batch"], t["chunk"], t["backward"], strict=True))
    assert len(keys) == len(t)
    for _, stage in t.groupby("stage"):  # a stage runs one task at a time
        assert np.all(stage["start_s"].to_numpy()[1:] >= stage["end_s"].to_numpy()[:-1])
    assert np.all(t["end_s"] > t["start_s"])


def test_makespan_is_the_forecasts_compute_bubble_and_exposed_sends(schedule):
    b = schedule.forecast.breakdown
    made = b["compute_s"] + b["bubble_s"] + sum(b[f"exposed_comm.{k}_s"] for k in INLINE)
    assert schedule.makespan_s == pytest.approx(made, rel=1e-9)
    assert schedule.tail["end_s"].max() == pytest.approx(schedule.forecast.iteration_time_s)


def test_pipeline_figure_has_one_box_per_task_where_it_ran(schedule):
    ax = pipeline_figure(schedule).axes[0]
    boxes = [p for p in ax.patches if p.get_gid() in ("forward", "backward")]
    assert len(boxes) == len(schedule.tasks)
    unit = ax.get_xlabel()[ax.get_xlabel().index("(") + 1:-1]
    factor = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
    drawn = sorted((round(p.get_y() + p.get_height() / 2), p.get_x(), p.get_width())
                   for p in boxes)
    t = schedule.tasks
    expect = sorted(zip(t["stage"], t["start_s"] * factor, (t["end_s"] - t["start_s"]) * factor,
                        strict=True))
    assert np.allclose(np.array(drawn, dtype=float), np.array(expect, dtype=float))


def test_training_trace_is_valid_chrome_trace_json(schedule):
    trace = json.loads(json.dumps(training_trace(schedule)))
    events = trace["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    named = {e["tid"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    for e in spans:
        assert {"ph", "ts", "dur", "pid", "tid", "name"} <= set(e)
        assert e["dur"] >= 0 and e["tid"] in named
    ts = [e["ts"] for e in spans]
    assert ts == sorted(ts)
    by_track: dict = {}
    for e in spans:
        by_track.setdefault((e["pid"], e["tid"]), []).append(e)
    for track in by_track.values():
        for a, b in zip(track, track[1:], strict=False):
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-6, (a, b)
    tasks = [e for e in spans if e["cat"] in ("forward", "backward")]
    assert len(tasks) == len(schedule.tasks)
    assert sum(e["cat"] == "p2p" for e in spans) == len(schedule.receives) > 0
    end = max(e["ts"] + e["dur"] for e in spans)
    assert end == pytest.approx(schedule.forecast.iteration_time_s * 1e6)
    assert any(e["name"] == "optimizer step" for e in spans)


def test_one_stage_is_gradient_accumulation_without_receives():
    s = training_schedule(_job(pp=1, dp=2, zero=1))
    assert s.stages == 1 and s.schedule == "gradient accumulation"
    assert len(s.tasks) == 2 * s.micro_batches and s.receives.empty
    assert s.tail["end_s"].max() == pytest.approx(s.forecast.iteration_time_s)
