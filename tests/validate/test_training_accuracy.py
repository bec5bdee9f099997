"""Training forecasts against MosaicML's measured llm-foundry grid (216 MPT configurations).

First the points and the harness with stand-in forecasts (parsing, MosaicML's MFU formula,
APE, row form); then the accuracy of the real forecasts, computed once per module: regression
thresholds (training_accuracy_thresholds.json: observed + a small margin), the issue's 8%
target and bias bounds on both held-out schemes, perfcast and sum_of_kernels beating the
roofline baseline, and the shipped training-stack factors matching a fresh fit."""

import json
from pathlib import Path

import pandas as pd
import pytest

from perfcast.errors import InputError
from perfcast.train import (
    default_time_model,
    forecast_training,
    stack_overlap,
    stack_time_model,
)
from perfcast.validate import (
    TRAINING_TARGET_MAPE,
    TRAINING_TARGET_UNDER,
    load_training_calibration,
    load_training_points,
    mosaicml_mfu,
    points_from_csv,
    training_job,
    training_residuals,
    validate_training,
)
from perfcast.validate._training_calibration import (
    calibration_document,
    kernel_split,
    scaled_seconds,
)

CSV = Path("/work/shared/data/training/llmfoundry_throughput.csv")
THRESHOLDS = json.loads((Path(__file__).parent / "training_accuracy_thresholds.json").read_text())


@pytest.fixture(scope="module")
def points():
    return load_training_points()


@pytest.mark.skipif(not CSV.exists(), reason="the shared benchmark CSV is not on this machine")
def test_shipped_points_are_the_csv_converted(points):
    pd.testing.assert_frame_equal(points, points_from_csv(CSV), check_dtype=False)
    raw = pd.read_csv(CSV)
    assert raw["notes"].nunique() == 13 and len(points) == len(raw) // 4 == 216


def test_points_map_hardware_sharding_and_precision(points):
    assert set(zip(points["device"], points["cluster"], strict=True)) == {
        ("A100-40GB", "dgx-a100-40gb"), ("A100-80GB", "dgx-a100"), ("H100-80GB", "dgx-h100")}
    assert points.groupby("fsdp")["zero_stage"].unique().map(list).to_dict() == {
        "FULL_SHARD": [3], "SHARD_GRAD_OP": [2]}
    assert set(points["precision"]) == {"bf16", "amp_bf16", "amp_fp8"}
    assert set(points["recompute"]) == {"full", "none"}
    assert (points["micro_batch"] * points["grad_accum"] * points["num_gpus"]
            == points["global_batch"]).all()
    assert not points["act_cpu_offload"].any()


def test_bad_rows_name_their_field(tmp_path, points):
    raw = pd.read_csv(CSV) if CSV.exists() else None
    if raw is None:
        pytest.skip("the shared benchmark CSV is not on this machine")
    for column, value, field in (("notes", "FSDP FULL_SHARD; grad_accum 2", "notes"),
                                 ("notes", "FSDP HYBRID; mp_mode PURE; grad_accum 1; "
                                  "act_cpu_offload False", "notes.fsdp"),
                                 ("hardware", "V100-32GB (lab)", "hardware"),
                                 ("precision", "fp16", "precision")):
        bad = raw.copy()
        bad.loc[bad["model"] == "MPT-125m", column] = value
        path = tmp_path / "bad.csv"
        bad.to_csv(path, index=False)
        with pytest.raises(InputError) as err:
            points_from_csv(path)
        assert err.value.field == field


def test_mosaicml_mfu_reproduces_the_published_mfu_and_hfu(points):
    for _, p in points.iterrows():
        mfu = mosaicml_mfu(p, p["tokens_per_s_per_gpu"])
        assert mfu * 100 == pytest.approx(p["mfu_pct"], rel=4e-3), p["point_id"]
        hfu = mfu * (4 / 3 if p["recompute"] == "full" else 1)  # 4x forward with recompute
        assert hfu * 100 == pytest.approx(p["hfu_pct"], rel=4e-3), p["point_id"]


def _ten_percent_fast(point):
    return 1.1 * float(point["tokens_per_s_per_gpu"]), float("nan")


def test_residuals_are_absolute_percentage_errors(points):
    res = training_residuals(_ten_percent_fast, points)
    assert set(res["metric"]) == {"tokens_per_s", "mfu"}  # no own MFU given
    tok = res[res["metric"] == "tokens_per_s"]
    assert tok["ape"].to_numpy() == pytest.approx(0.1)
    assert res.loc[res["metric"] == "mfu", "ape"].to_numpy() == pytest.approx(0.1, abs=5e-3)


def test_rows_have_the_kernel_validation_form(points):
    def refuse_fp8(point):
        if point["precision"] == "amp_fp8":
            raise InputError("precision", "no fp8 here", "bf16")
        return float(point["tokens_per_s_per_gpu"]), 0.5

    rows = validate_training(refuse_fp8, points, method="stand_in")
    assert list(rows.columns[:8]) == ["split", "device", "group", "method", "mape",
                                      "median_ape", "p90_ape", "n"]
    assert len(rows.attrs["skipped"]) == (points["precision"] == "amp_fp8").sum() == 7
    top = rows[(rows["device"] == "all") & (rows["by"] == "metric")].set_index("group")
    assert top.loc["tokens_per_s", "mape"] == 0.0 and top.loc["tokens_per_s", "n"] == 209
    assert top.loc["mfu_perfcast", "mape"] > 0
    scales = set(rows.loc[rows["by"] == "scale", "group"].str.split("/").str[0])
    assert scales == {"gpus<=8", "gpus16-64", "gpus>=128"}
    models = set(rows.loc[rows["by"] == "model", "group"].str.split("/").str[0])
    assert models == set(points["model"])
    per_device = rows[(rows["by"] == "metric") & (rows["group"] == "tokens_per_s")]
    assert set(per_device["device"]) == {"A100-40GB", "A100-80GB", "H100-80GB", "all"}


def test_bad_forecasts_are_refused(points):
    with pytest.raises(InputError) as err:
        training_residuals(lambda p: (0.0, 0.5), points.head(2))
    assert err.value.field == "forecast_point"


@pytest.fixture(scope="module")
def kernels(points):
    return kernel_split(points, default_time_model())


@pytest.fixture(scope="module")
def rows(points, kernels):
    return validate_training(points=points, kernels=kernels)


def _mape(rows, split, method, metric, device="all"):
    sel = rows[(rows["split"] == split) & (rows["method"] == method) & (rows["by"] == "metric")
               & (rows["group"] == metric) & (rows["device"] == device)]
    assert len(sel) == 1, (split, method, metric, device)
    return float(sel["mape"].iloc[0])


@pytest.mark.parametrize("key", sorted(THRESHOLDS["max_mape"]))
def test_mape_does_not_regress(rows, key):
    split, method, metric = key.split("/")
    assert _mape(rows, split, method, metric) <= THRESHOLDS["max_mape"][key]


def test_heldout_model_mape_per_device(rows):
    for device, limit in THRESHOLDS["max_heldout_model_mape_per_device"].items():
        assert _mape(rows, "heldout_model", "perfcast", "tokens_per_s", device) <= limit


def test_perfcast_beats_the_roofline_everywhere(rows):
    for split in ("all", "heldout_device", "heldout_model"):
        for device in ("A100-40GB", "A100-80GB", "H100-80GB", "all"):
            roof = _mape(rows, split, "roofline", "tokens_per_s", device)
            kernels_only = _mape(rows, split, "sum_of_kernels", "tokens_per_s", device)
            assert kernels_only < roof, (split, device)
            if split != "all":
                assert _mape(rows, split, "perfcast", "tokens_per_s", device) < roof


def test_every_point_is_forecast_in_every_group_kind(rows):
    overall = rows[(rows["device"] == "all") & rows["group"].str.endswith("tokens_per_s")]
    assert set(overall.groupby(["split", "method", "by"])["n"].sum()) == {216}
    assert set(rows["method"]) == {"roofline", "sum_of_kernels", "perfcast"}
    assert "perfcast" not in set(rows.loc[rows["split"] == "all", "method"])


def test_shipped_factors_are_a_fresh_fit(kernels):
    shipped = load_training_calibration()
    fresh = calibration_document(kernels)
    for key in ("other", "attention", "overlap_loss"):
        assert shipped["factors"][key] == pytest.approx(fresh["factors"][key], abs=2e-3), key
    for scheme, mape in fresh["heldout_tokens_per_s_mape"].items():
        for key, value in mape.items():
            assert shipped["heldout_tokens_per_s_mape"][scheme][key] == pytest.approx(
                value, abs=2e-3), (scheme, key)


def test_heldout_schemes_meet_the_target_without_one_sided_bias(rows):
    """Issue 21: MAPE <= 8% held out by model and by GPU generation, and between 35% and
    65% of the rows forecast too fast."""
    low, high = TRAINING_TARGET_UNDER
    for split in ("heldout_device", "heldout_model"):
        assert _mape(rows, split, "perfcast", "tokens_per_s") <= TRAINING_TARGET_MAPE, split
        sel = rows[(rows["split"] == split) & (rows["method"] == "perfcast")
                   & (rows["by"] == "metric") & (rows["group"] == "tokens_per_s")
                   & (rows["device"] == "all")]
        assert low <= float(sel["under_predicted"].iloc[0]) <= high, split


def test_scaled_time_model_matches_the_linear_decomposition(points, kernels):
    """The held-out figures scale the forecast's kernel classes and hidden communication
    linearly; a real forecast with the stack's time model and overlap loss agrees (exposed
    comm, held fixed there, is tiny on this grid)."""
    f = load_training_calibration()["factors"]
    for i in (0, 100, 150, 215):
        p = points.iloc[i]
        job = training_job(p)
        model = stack_time_model("llm-foundry", job.cluster.device, default_time_model())
        job = job.model_copy(update={"overlap": stack_overlap("llm-foundry")})
        real = forecast_training(job, time_model=model).iteration_time_s
        linear = scaled_seconds(kernels.iloc[[i]], f["other"], f["attention"],
                                f["overlap_loss"])[0]
        assert real == pytest.approx(linear, rel=5e-3), p["point_id"]
