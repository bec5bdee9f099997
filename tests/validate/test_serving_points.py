"""Shipped end-to-end serving points and the TTFT/TPOT validation harness."""

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfcast.errors import InputError
from perfcast.kernels import RooflineModel
from perfcast.specs import DType, device_names, get_model, model_names
from perfcast.validate._serving import (
    analytic_point,
    load_serving_points,
    point_precision,
    serving_residuals,
    validate_serving,
)

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"
ROW_KEYS = ["split", "device", "group", "method", "mape", "median_ape", "p90_ape", "n"]


@pytest.fixture(scope="module")
def points():
    return load_serving_points()


def _measured(p):
    return float(p["ttft_s"]), float(p["tpot_s"])


def test_shipped_points_are_catalogued_aggregated(points):
    assert len(points) == 2168 and points["point_id"].is_unique
    dense, moe = points[points["arch"] == "dense"], points[points["arch"] == "moe"]
    assert len(dense) == 844 and len(moe) == 1324
    assert set(dense["model"]) == {"llama-3.1-8b", "llama-3.1-70b", "qwen3-32b"}
    assert set(moe["model"]) == {"deepseek-r1", "deepseek-v3", "deepseek-v3.1",
                                 "qwen3-235b-a22b", "gpt-oss-120b", "minimax-m2.5",
                                 "qwen3.5-397b-a17b", "kimi-k2.5", "glm-5.1"}
    assert all(get_model(m).moe is not None for m in set(moe["model"]))
    assert set(dense["model"]) <= set(model_names())
    assert set(points["device"]) == {"h100-sxm", "b200-sxm"} <= set(device_names())
    assert set(points["backend"]) == {"trtllm", "vllm", "sglang"}
    assert {DType(p) for p in points["precision"]} == {DType.BF16, DType.FP8, DType.FP4,
                                                       DType.INT4}
    assert set(points["precision_source"]) == {"csv", "assumed-bf16"}
    assert (points[["isl", "osl", "concurrency", "tp", "pp", "dp", "ep", "moe_tp"]] >= 1
            ).all().all()
    assert (points["pp"] == 1).all() and (dense[["dp", "ep"]] == 1).all().all()
    # one 8-GPU node: attention tp x dp = expert moe_tp x ep
    assert (moe["tp"] * moe["dp"] == moe["moe_tp"] * moe["ep"]).all()
    assert (moe["tp"] * moe["dp"] <= 8).all()
    assert (points["ttft_s"] > 0).all() and (points["tpot_s"] > 0).all()
    assert points["source_file"].eq("aiconfigurator/systems/silicon_sample_dev.csv").all()


@pytest.mark.skipif(not (SHARED / "aiconfigurator").is_dir(), reason="shared data not here")
def test_shipped_points_rebuild_from_the_source(points):
    spec = importlib.util.spec_from_file_location(
        "build_serving_points", REPO / "scripts" / "build_serving_points.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rebuilt = mod.derive(SHARED)
    assert list(rebuilt["point_id"]) == list(points["point_id"])
    assert np.allclose(rebuilt["ttft_s"], points["ttft_s"], rtol=1e-8)
    assert (rebuilt["concurrency"].to_numpy() == points["concurrency"].to_numpy()).all()


def test_perfect_callable_gives_zero_error(points):
    rows = validate_serving(_measured, points, method="oracle")
    assert list(rows.columns) == ROW_KEYS
    assert (rows["mape"] == 0).all() and (rows["p90_ape"] == 0).all()
    per = rows[rows["split"] != "all"]
    assert per["n"].sum() == 2 * len(points)
    assert set(per["group"].str.split("/").str[1]) == {"ttft", "tpot"}
    assert set(per["split"]) == {"trtllm", "vllm", "sglang"} and set(rows["method"]) == {"oracle"}
    overall = rows[rows["split"] == "all"].set_index("group")["n"].to_dict()
    assert overall == {"all/ttft": len(points), "all/tpot": len(points)}


def test_errors_do_not_cancel(points):
    sub = points.iloc[:40]
    flip = {pid: (1.1 if i % 2 else 0.9) for i, pid in enumerate(sub["point_id"])}

    def off_by_ten(p):  # +10% on half the points, -10% on the other half
        return tuple(v * flip[p["point_id"]] for v in _measured(p))

    rows = validate_serving(off_by_ten, sub, method="pm10")
    assert np.allclose(rows["mape"], 0.1) and np.allclose(rows["median_ape"], 0.1)
    doubled = validate_serving(lambda p: (2 * p["ttft_s"], 3 * p["tpot_s"]), sub)
    by_metric = doubled[doubled["split"] == "all"].set_index("group")["mape"]
    assert by_metric["all/ttft"] == pytest.approx(1.0)
    assert by_metric["all/tpot"] == pytest.approx(2.0)


def test_refused_points_are_skipped_and_listed(points):
    sub = points.iloc[:10]

    def picky(p):
        if p["concurrency"] > 8:
            raise InputError("concurrency", "too many for this stand-in")
        return _measured(p)

    res = serving_residuals(picky, sub)
    skipped = res.attrs["skipped"]
    assert len(skipped) == int((sub["concurrency"] > 8).sum())
    assert len(res) == 2 * (len(sub) - len(skipped))
    assert validate_serving(picky, sub).attrs["skipped"] == skipped


@pytest.mark.parametrize("bad", [(1.0,), (0.0, 1.0), (float("nan"), 1.0), (1.0, -2.0)])
def test_bad_forecasts_are_refused(points, bad):
    with pytest.raises(InputError) as e:
        validate_serving(lambda p: bad, points.iloc[:2])
    assert e.value.field == "simulate_point"


def test_points_missing_columns_refused(points):
    with pytest.raises(InputError) as e:
        validate_serving(_measured, points.drop(columns=["concurrency"]))
    assert e.value.field == "points"


def test_point_precision():
    assert point_precision(pd.Series({"precision": "bf16"})).kv_cache == DType.BF16
    fp4 = point_precision(pd.Series({"precision": "fp4"}))
    assert (fp4.weights, fp4.activations, fp4.kv_cache) == (DType.FP4, DType.FP4, DType.FP8)
    # Hopper has no fp4 tensor cores: its fp4 checkpoints (gpt-oss's MXFP4) run W4A16
    hopper = point_precision(pd.Series({"precision": "fp4", "device": "h100-sxm"}))
    assert (hopper.weights, hopper.activations) == (DType.FP4, DType.BF16)
    int4 = point_precision(pd.Series({"precision": "int4"}))  # int4_wo: weight-only
    assert (int4.weights, int4.activations) == (DType.INT4, DType.BF16)


def test_analytic_roofline_is_a_lower_bound_on_ttft(points):
    """With no queueing and every kernel at its roof, TTFT can only be under-forecast; TPOT
    grows with the decode batch. (Both checked on a slice: one deployment per model.)"""
    roof = RooflineModel()
    dense = points[points["arch"] == "dense"]  # kept fast; MoE: test_serving_moe_accuracy
    sub = dense.groupby(["model", "device", "precision"]).head(12)
    res = serving_residuals(lambda p: analytic_point(p, roof), sub)
    ttft = res[res["metric"] == "ttft"]
    assert (ttft["forecast_s"] <= ttft["measured_s"]).all()
    p = sub.iloc[0].to_dict()
    one = analytic_point(pd.Series({**p, "concurrency": 1}), roof)[1]
    many = analytic_point(pd.Series({**p, "concurrency": 128}), roof)[1]
    assert 0 < one < many
    assert analytic_point(pd.Series(p), roof) == analytic_point(pd.Series(p), roof)


def test_analytic_default_is_deterministic_and_named(points):
    sub = points[points["model"] == "llama-3.1-8b"].iloc[:6]
    a, b = validate_serving(points=sub), validate_serving(points=sub)
    pd.testing.assert_frame_equal(a, b)
    assert set(a["method"]) == {"sum_of_kernels"}
    assert (a["mape"] > 0).all() and (a["n"] > 0).all()


def test_moe_points_replay_their_layout(points):
    """An attention-DP point runs dp replicas of tp GPUs sharing one EP group."""
    from perfcast.validate._serving import point_plan
    from perfcast.validate._serving_sim import _config

    moe = points[(points["arch"] == "moe") & (points["dp"] > 1)].iloc[0]
    plan = point_plan(moe)
    assert (plan.tp, plan.dp, plan.ep) == (moe["tp"], moe["dp"], moe["ep"])
    assert plan.moe_tp == moe["moe_tp"]
    config = _config(moe, 8)
    assert (config.replicas, config.attention_dp, config.ep) == (moe["dp"], moe["dp"], moe["ep"])
    dense = points[points["arch"] == "dense"].iloc[0]
    assert (point_plan(dense).dp, point_plan(dense).ep) == (1, 1)
