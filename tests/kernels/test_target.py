"""calibrate_device: a user's corrections merged family by family, kept only where they beat
the shipped model out of sample, and pricing the family's kernels whatever their names."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.kernels import PhysicsModel, measurement_ops, shipped_calibration
from perfcast.kernels._target import (
    CALIBRATED,
    KEPT_BASE,
    LOG_MIN_GAIN,
    MIN_GAIN,
    calibrate_device,
    log_error,
    mape,
)
from perfcast.measure import load_store
from perfcast.specs import get_device

H100 = get_device("h100-sxm")


@pytest.fixture(scope="module")
def h100_rows() -> pd.DataFrame:
    """60 TensorRT-LLM bf16 GEMMs and 40 fp16 norms of the H100, seeded."""
    store = load_store()
    own = store[store["device"] == "h100-sxm"]
    gemm = own[(own["family"] == "gemm") & (own["dtype"] == "bf16")]
    norm = own[(own["family"] == "norm") & (own["dtype"] == "fp16")]
    return pd.concat([gemm.sample(60, random_state=0), norm.sample(40, random_state=0)],
                     ignore_index=True)


def _priced(rows: pd.DataFrame, cal) -> np.ndarray:
    return PhysicsModel(cal).kernel_times(measurement_ops(rows), H100,
                                          rows["timing"].to_numpy(dtype=object))


def _slower_gemm(rows: pd.DataFrame, factor: float) -> pd.DataFrame:
    """The rows as a stack whose GEMMs run `factor` x slower than the shipped model says,
    its norms exactly as shipped (timed with another kernel name: `matmul`)."""
    base = _priced(rows, shipped_calibration())
    gemm = (rows["family"] == "gemm").to_numpy()
    return rows.assign(latency_s=np.where(gemm, base * factor, base),
                       op=np.where(gemm, "matmul", rows["op"]))


def test_a_slower_stack_is_calibrated_and_the_exact_family_keeps_shipped(h100_rows):
    rows = _slower_gemm(h100_rows, 2.0)
    result = calibrate_device(shipped_calibration(), rows, H100)
    by_key = {c.key: c for c in result.checks}
    assert by_key["gemm/bf16"].status == CALIBRATED
    assert by_key["gemm/bf16"].calibrated_mape < by_key["gemm/bf16"].base_mape
    assert by_key["norm/fp16"].status == KEPT_BASE  # the shipped model is exact there
    assert result.calibrated == ["gemm/bf16"] and result.kept == ["norm/fp16"]
    assert set(result.own.devices["h100-sxm"]) == {"gemm/bf16"}
    assert any("norm/fp16: kept the shipped model" in w for w in result.warnings())


def test_merge_keeps_the_devices_shipped_families(h100_rows):
    result = calibrate_device(shipped_calibration(), _slower_gemm(h100_rows, 2.0), H100)
    shipped = set(shipped_calibration().devices["h100-sxm"])
    merged = set(result.merged.devices["h100-sxm"])
    assert shipped <= merged  # attention, fp8, MoE... keep the shipped H100 corrections
    assert result.merged.devices["h100-sxm"]["norm/fp16"] is \
        shipped_calibration().devices["h100-sxm"]["norm/fp16"]


def test_the_measured_kernel_prices_forecast_rows_of_other_names(h100_rows):
    """The sweep named its GEMM `matmul`; a forecast's `linear:qkv` rows on the device are
    priced by the user's correction (about 2x the shipped time), not silently ignored."""
    rows = _slower_gemm(h100_rows, 2.0)
    result = calibrate_device(shipped_calibration(), rows, H100)
    gemm = rows[rows["family"] == "gemm"].head(20)
    renamed = gemm.assign(op="linear:qkv")
    before = _priced(renamed, shipped_calibration())
    after = _priced(renamed, result.merged)
    ratio = np.median(after / before)
    assert 1.6 < ratio < 2.5


def test_too_few_rows_keep_shipped(h100_rows):
    rows = _slower_gemm(h100_rows, 2.0).head(3)
    result = calibrate_device(shipped_calibration(), rows, H100)
    assert result.checks[0].status == KEPT_BASE and "too few" in result.checks[0].reason
    assert result.own.devices == {}


def test_deterministic(h100_rows):
    rows = _slower_gemm(h100_rows, 1.5)
    a = calibrate_device(shipped_calibration(), rows, H100, seed=3)
    b = calibrate_device(shipped_calibration(), rows, H100, seed=3)
    assert a.own.to_json() == b.own.to_json()


@settings(max_examples=6, deadline=None)
@given(factor=st.floats(0.3, 4.0), seed=st.integers(0, 3))
def test_never_worse_out_of_sample(h100_rows, factor, seed):
    """Whatever the stack's speed, every family the file keeps beat the shipped model on
    held-out rows (MAPE by MIN_GAIN, or |log error| by LOG_MIN_GAIN with MAPE no worse),
    and the others are the shipped model's."""
    rows = _slower_gemm(h100_rows, factor)
    result = calibrate_device(shipped_calibration(), rows, H100, folds=3, seed=seed)
    for check in result.checks:
        if check.status == CALIBRATED:
            assert check.calibrated_mape < check.base_mape * (1 - MIN_GAIN) or (
                check.calibrated_log_error < check.base_log_error * (1 - LOG_MIN_GAIN)
                and check.calibrated_mape <= check.base_mape)
            assert check.kept_log_error == check.calibrated_log_error
        else:
            assert check.key not in result.own.devices.get("h100-sxm", {})


def test_mape():
    assert mape(np.array([2.0, 1.0]), np.array([1.0, 1.0])) == pytest.approx(0.5)


def test_log_error_is_symmetric():
    """2x too slow and 2x too fast err alike (MAPE: 100% and 50%)."""
    assert log_error(np.array([2.0]), np.array([1.0])) == pytest.approx(np.log(2.0))
    assert log_error(np.array([0.5]), np.array([1.0])) == pytest.approx(np.log(2.0))
