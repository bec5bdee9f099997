"""`perfcast calibrate` also fits the learned model's target tier (issue 18 item 3): the
device's residual over the shipped trees, kept per family where it beats the trees on
held-out folds, stored in the calibration file and used by `--kernel-model learned
--calibration FILE`; a tier fitted over other trees is refused with a warning, and a file
without one loads as before."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perfcast.api import CalibrateRequest, InferRequest, run
from perfcast.kernels import (
    Calibration,
    DeviceResidual,
    LearnedTimeModel,
    kernel_features,
    learned_target_tier,
    learned_time_model,
    measurement_ops,
    shipped_learned,
)
from perfcast.measure import load_store
from perfcast.specs import get_device

H100 = get_device("h100-sxm")


def _rows(n: int = 80):
    store = load_store()
    return store[(store["device"] == "h100-sxm") & (store["family"] == "gemm")
                 & (store["dtype"] == "bf16")].sample(n, random_state=3)


def _learned_s(rows):
    return learned_time_model().kernel_times(measurement_ops(rows), H100,
                                             rows["timing"].to_numpy(dtype=object))


@pytest.fixture(scope="module")
def slow_gemms(tmp_path_factory):
    """80 bf16 GEMMs of the H100 running 1.8x the shipped learned model (a slower stack),
    calibrated through `run`: (the calibrate result, the file, the rows)."""
    rows = _rows()
    rows = rows.assign(latency_s=_learned_s(rows) * 1.8)
    folder = tmp_path_factory.mktemp("cal")
    measurements = folder / "h100.parquet"
    rows.to_parquet(measurements, index=False)
    out = folder / "h100.json"
    result = run(CalibrateRequest.from_options(measurements=measurements, device="h100-sxm",
                                               stack="trtllm", out=out))
    return result, out, rows


def _infer(**options):
    return run(InferRequest.from_options(model="llama-2-7b", gpu="h100-sxm", stack="trtllm",
                                         **options)).payload()


def test_calibrate_keeps_the_residual_that_beats_the_trees(slow_gemms):
    result, out, _ = slow_gemms
    tier = result.payload()["learned_target"]
    assert tier["families"] == ["gemm"]
    (check,) = tier["checks"]
    assert check["kept"] and check["rows"] == 80
    assert check["calibrated_mape"] < 0.1 < 0.4 < check["learned_mape"]  # 1.8x: 44% off
    stored = Calibration.load(out).learned
    assert stored["over"] == shipped_learned().fingerprint
    assert set(stored["devices"]) == {"h100-sxm"}


def test_the_learned_forecast_uses_the_files_residual(slow_gemms):
    _, out, rows = slow_gemms
    plain = _infer(kernel_model="learned")
    cal = _infer(kernel_model="learned", calibration=str(out))
    info = cal["inputs"]["kernel_model"]
    assert info["calibration_learned_families"] == ["gemm"]
    assert not any("learned-model residuals" in w for w in info["calibration_warnings"])
    assert cal["tpot_s"] > plain["tpot_s"] * 1.2  # GEMM-bound decode, GEMMs 1.8x slower
    # the same residual priced directly: the measured rows come back within 10%
    model = shipped_learned().with_target_tier(Calibration.load(out).learned)
    own = model.device_residual("h100-sxm")
    assert isinstance(own, DeviceResidual) and own.skip == ()
    times = LearnedTimeModel(model, learned_time_model().fallback).kernel_times(
        measurement_ops(rows), H100, rows["timing"].to_numpy(dtype=object))
    assert np.median(np.abs(times / rows["latency_s"].to_numpy() - 1)) < 0.1


def test_the_physical_model_ignores_the_learned_tier(slow_gemms):
    _, out, _ = slow_gemms
    info = _infer(calibration=str(out))["inputs"]["kernel_model"]
    assert "calibration_learned_families" not in info
    assert not any("learned-model residuals" in w for w in info["calibration_warnings"])


def test_a_tier_over_other_trees_is_not_applied(slow_gemms, tmp_path):
    _, out, _ = slow_gemms
    data = json.loads(out.read_text())
    data["learned"]["over"] = "0" * 16  # another perfcast's shipped trees
    other = tmp_path / "other.json"
    other.write_text(json.dumps(data))
    cal = _infer(kernel_model="learned", calibration=str(other))
    info = cal["inputs"]["kernel_model"]
    assert info["calibration_learned_families"] == []
    assert any("learned-model residuals" in w for w in info["calibration_warnings"])


def test_a_file_without_the_tier_loads_as_before(slow_gemms, tmp_path):
    _, out, _ = slow_gemms
    data = json.loads(out.read_text())
    del data["learned"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    assert Calibration.load(old).learned == {}
    info = _infer(kernel_model="learned", calibration=str(old))["inputs"]["kernel_model"]
    assert info["calibration_learned_families"] == []
    assert not any("learned-model residuals" in w for w in info["calibration_warnings"])


def test_the_tier_round_trips_through_json(slow_gemms):
    _, out, _ = slow_gemms
    cal = Calibration.load(out)
    assert Calibration.from_json(cal.to_json()).learned == cal.learned
    own = DeviceResidual.from_dict(cal.learned["devices"]["h100-sxm"])
    skipped = own.skipping(("gemm",))
    again = DeviceResidual.from_dict(json.loads(json.dumps(skipped.to_dict())))
    assert again.skip == ("gemm",) and "gemm" not in again.envelope


def test_a_skipped_family_is_left_uncorrected(slow_gemms):
    _, out, rows = slow_gemms
    own = DeviceResidual.from_dict(Calibration.load(out).learned["devices"]["h100-sxm"])
    ops = measurement_ops(rows)
    feats = kernel_features(ops, H100, rows["timing"].to_numpy(dtype=object))
    categories = shipped_learned().categories
    assert np.all(own.correction(ops, feats, categories) > 0.3)  # log 1.8 = 0.59
    assert np.all(own.skipping(("gemm",)).correction(ops, feats, categories) == 0.0)


def test_rows_at_the_trees_forecast_keep_no_residual():
    """Measurements equal to the shipped trees' forecast: nothing to correct, so the
    residual cannot beat the trees out of sample (it can only add noise)."""
    rows = _rows(60)
    rows = rows.assign(latency_s=_learned_s(rows))
    (check,) = learned_target_tier(shipped_learned(), rows, H100, folds=3)["checks"]
    assert check["learned_mape"] < 1e-9 and not check["kept"]


def test_a_file_whose_check_kept_no_residual_warns_of_nothing(slow_gemms, tmp_path):
    _, out, _ = slow_gemms
    data = json.loads(out.read_text())
    data["learned"] = {"checks": [{**data["learned"]["checks"][0], "kept": False}]}
    none = tmp_path / "none.json"
    none.write_text(json.dumps(data))
    info = _infer(kernel_model="learned", calibration=str(none))["inputs"]["kernel_model"]
    assert info["calibration_learned_families"] == []
    assert not any("learned-model residuals" in w for w in info["calibration_warnings"])
