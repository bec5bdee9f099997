"""The report layer's figures draw exactly the numbers of the results they are given."""

import numpy as np
import pandas as pd
import pytest

from perfcast.compose import forecast_inference, step_time
from perfcast.errors import InputError
from perfcast.ops import eager_ops
from perfcast.report import (
    breakdown_figure,
    breakdown_table,
    cdf_figure,
    empirical_cdf,
    memory_figure,
    memory_table,
    pareto_figure,
    pareto_front,
    roofline_ceilings,
    roofline_figure,
    roofline_points,
    save_figure,
    throughput_latency_figure,
)
from perfcast.specs import ParallelPlan, Precision, cluster_for, get_device, get_model
from perfcast.train import TrainJob, forecast_training

A100 = get_device("a100-sxm4-80gb")


@pytest.fixture(scope="module")
def gpt2_ops():
    return eager_ops(get_model("gpt2"), 2, 256, "forward", Precision.uniform("fp16"))


@pytest.fixture(scope="module")
def train_forecasts():
    model, cluster = get_model("gpt2"), cluster_for(A100, 4)
    return {f"pp{pp}": forecast_training(TrainJob(
        model=model, cluster=cluster, plan=ParallelPlan(pp=pp, dp=4 // pp), seq_len=512,
        micro_batch=2, global_batch=16)) for pp in (1, 4)}


def _factor(label: str) -> float:
    unit = label[label.index("(") + 1:label.index(")")]
    return {"s": 1.0, "ms": 1e3, "us": 1e6, "GB": 1e-9}[unit]


def test_roofline_ridge_sits_at_peak_over_bandwidth(gpt2_ops):
    ax = roofline_figure(gpt2_ops, A100).axes[0]
    roofs = roofline_ceilings(A100, ("fp16",)).set_index("label")
    lines = {line.get_gid(): line for line in ax.get_lines()}
    for label, roof in roofs.iterrows():
        x, y = lines[f"roof:{label}"].get_data()
        assert x[1] == pytest.approx(roof.peak_flops / A100.hbm_bandwidth_bps)
        assert y[1] == pytest.approx(roof.peak_flops / 1e12)
        assert y[0] / x[0] == pytest.approx(A100.hbm_bandwidth_bps / 1e12)  # the slope
        assert y[2] == y[1]  # flat roof after the ridge
    assert roofs.loc["fp16 matrix peak", "peak_flops"] == A100.peak_flops("fp16")


def test_roofline_points_are_flops_over_bytes_and_flops_over_time(gpt2_ops):
    ops = pd.DataFrame([{"op": "mm", "layer": "l0", "family": "gemm", "flops": 2e12,
                         "bytes_read": 1e9, "bytes_written": 1e9, "dtype": "fp16",
                         "count": 3, "time_s": 0.01}])
    p = roofline_points(ops, A100).iloc[0]
    assert p.intensity_flop_per_byte == pytest.approx(1000.0)
    assert p.achieved_flops == pytest.approx(2e14)
    points = roofline_points(gpt2_ops, A100)
    assert len(points) > 5 and (points["achieved_flops"] <= points["peak_flops"] * 1.0001).all()
    ax = roofline_figure(gpt2_ops, A100).axes[0]
    drawn = np.concatenate([c.get_offsets() for c in ax.collections])
    assert len(drawn) == len(points)
    assert sorted(drawn[:, 1]) == pytest.approx(sorted(points["achieved_flops"] / 1e12))


def test_roofline_rejects_a_table_that_is_not_an_op_table():
    with pytest.raises(InputError, match="ops"):
        roofline_points(pd.DataFrame({"x": [1]}), A100)


def _bars(ax) -> dict[str, list[float]]:
    return {c.get_label(): [p.get_height() for p in c.patches] for c in ax.containers}


def test_breakdown_bars_equal_the_training_breakdown(train_forecasts):
    ax = breakdown_figure(train_forecasts).axes[0]
    factor = _factor(ax.get_ylabel())
    bars = _bars(ax)
    for i, fc in enumerate(train_forecasts.values()):
        table = breakdown_table(fc)
        assert table.sum() == pytest.approx(fc.iteration_time_s)
        assert "pipeline bubble" in table or fc.breakdown["bubble_s"] == 0
        for component, seconds in table.items():
            assert bars[component][i] == pytest.approx(seconds * factor)
        assert sum(b[i] for b in bars.values()) == pytest.approx(fc.iteration_time_s * factor)


def test_breakdown_of_inference_sums_to_end_to_end_latency():
    fc = forecast_inference(get_model("gpt2"), cluster_for(A100, 1), prompt_tokens=128,
                            output_tokens=16)
    table = breakdown_table(fc)
    assert table.sum() == pytest.approx(fc.e2e_s)
    step = step_time(eager_ops(get_model("gpt2"), 1, 128), cluster_for(A100, 1))
    assert breakdown_table(step).sum() == pytest.approx(step.time_s)
    ax = breakdown_figure({"a": fc, "b": {"gemm": fc.e2e_s}}).axes[0]
    bars = _bars(ax)
    assert bars["gemm"][1] == pytest.approx(fc.e2e_s * _factor(ax.get_ylabel()))
    with pytest.raises(InputError, match="forecast"):
        breakdown_table(42)


def test_memory_bars_and_capacity_line(train_forecasts):
    ax = memory_figure(train_forecasts).axes[0]
    bars = _bars(ax)
    for i, fc in enumerate(train_forecasts.values()):
        for kind, value in memory_table(fc).items():
            assert bars[kind][i] == pytest.approx(value / 1e9)
        assert sum(b[i] for b in bars.values()) == pytest.approx(fc.memory_per_gpu_bytes / 1e9)
    (cap,) = [line for line in ax.get_lines() if line.get_gid() == "capacity"]
    usable = {fc.capacity_bytes for fc in train_forecasts.values()}  # the MemoryBudget's
    assert cap.get_ydata()[0] == pytest.approx(usable.pop() / 1e9)
    fc = forecast_inference(get_model("gpt2"), cluster_for(A100, 1), prompt_tokens=64,
                            output_tokens=8)
    assert memory_table(fc).sum() == pytest.approx(fc.memory.total_bytes)
    with pytest.raises(InputError, match="capacity_bytes"):
        memory_figure(fc, capacity_bytes=-1)


def test_empirical_cdf_is_monotone_and_ends_at_one():
    x, f = empirical_cdf([3.0, np.nan, 1.0, 2.0, 2.0])
    assert list(x) == [1.0, 2.0, 2.0, 3.0]
    assert np.all(np.diff(f) > 0) and f[-1] == 1.0 and f[0] == 0.25


def test_cdf_figure_draws_one_monotone_curve_per_run_and_metric():
    rng = np.random.default_rng(1)
    runs = {name: pd.DataFrame({"ttft_s": rng.gamma(2, 0.1, 50),
                                "tpot_s": np.r_[np.nan, rng.gamma(2, 0.01, 49)]})
            for name in ("vllm", "sarathi")}
    fig = cdf_figure(runs)
    curves = [line for ax in fig.axes for line in ax.get_lines()
              if (line.get_gid() or "").startswith("cdf:")]
    assert len(curves) == 4
    for line in curves:
        x, y = line.get_data()
        assert np.all(np.diff(x) >= 0) and np.all(np.diff(y) > 0) and y[-1] == 1.0
    with pytest.raises(InputError, match="metrics"):
        cdf_figure(runs["vllm"], metrics=("ttft",))


def test_throughput_latency_curves_follow_offered_load():
    table = pd.DataFrame({"cfg": ["a"] * 3 + ["b"] * 3, "qps": [4, 1, 2, 1, 2, 4],
                          "tput": [40, 10, 20, 10, 20, 30], "p50": [3, 1, 2, 1, 1.5, 9],
                          "p99": [6, 2, 4, 2, 3, 18]})
    ax = throughput_latency_figure(table, "tput", ("p50", "p99"), "cfg").axes[0]
    lines = {line.get_gid(): line for line in ax.get_lines()}
    assert set(lines) == {"curve:cfg=a:p50", "curve:cfg=a:p99", "curve:cfg=b:p50",
                          "curve:cfg=b:p99"}
    x, y = lines["curve:cfg=a:p99"].get_data()
    assert list(x) == [10, 20, 40] and list(y) == [2, 4, 6]  # seconds: the unit is s
    with pytest.raises(InputError, match="group"):
        throughput_latency_figure(table, "tput", "p50", "config")


def _dominated(c, lat, i) -> bool:
    return bool(np.any((c <= c[i]) & (lat <= lat[i]) & ((c < c[i]) | (lat < lat[i]))))


@pytest.mark.parametrize("seed", range(5))
def test_pareto_front_is_exactly_the_non_dominated_rows(seed):
    rng = np.random.default_rng(seed)
    table = pd.DataFrame({"cost": rng.integers(0, 8, 60).astype(float),
                          "lat": rng.integers(0, 8, 60).astype(float)})
    table.loc[3, "lat"] = np.nan
    front = pareto_front(table, "cost", "lat")
    rows = table.dropna()
    c, lat = rows["cost"].to_numpy(), rows["lat"].to_numpy()
    expect = {idx for i, idx in enumerate(rows.index) if not _dominated(c, lat, i)}
    assert set(front.index) == expect
    assert list(front["cost"]) == sorted(front["cost"])


def test_pareto_figure_highlights_the_front():
    table = pd.DataFrame({"cost": [1, 2, 3, 2], "lat": [5, 3, 1, 4], "name": list("abcd")})
    assert list(pareto_front(table, "cost", "lat")["name"]) == ["a", "b", "c"]
    ax = pareto_figure(table, "cost", "lat", label="name").axes[0]
    (front,) = [c for c in ax.collections if c.get_gid() == "front"]
    assert front.get_offsets().tolist() == [[1, 5], [2, 3], [3, 1]]
    with pytest.raises(InputError, match="latency"):
        pareto_front(table, "cost", "p99")


def test_save_figure_is_deterministic_and_checks_the_path(tmp_path, train_forecasts):
    paths = []
    for i in range(2):
        for suffix in (".svg", ".png"):
            paths.append(save_figure(memory_figure(train_forecasts), tmp_path / f"m{i}{suffix}"))
    assert paths[0].read_bytes() == paths[2].read_bytes()
    assert paths[1].read_bytes() == paths[3].read_bytes()
    assert paths[1].read_bytes().startswith(b"\x89PNG")
    assert b"<svg" in paths[0].read_bytes()
    fig = memory_figure(train_forecasts)
    with pytest.raises(InputError, match="out"):
        save_figure(fig, tmp_path / "m.pdf")
    with pytest.raises(InputError, match="exists"):
        save_figure(fig, paths[0])
    with pytest.raises(InputError, match="folder"):
        save_figure(fig, tmp_path / "missing" / "m.png")
