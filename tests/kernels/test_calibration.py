from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.kernels import (
    CROSS_GENERATION,
    TARGET_MEASURED,
    Calibration,
    PhysicsModel,
    add_target_corrections,
    fit_calibration,
    measurement_ops,
    roofline_times,
    shipped_calibration,
)
from perfcast.kernels._physics import FamilyParams, evaluate, prepare
from perfcast.specs import get_device

DEVICES = ("a100-sxm4-80gb", "h100-sxm", "l40s", "h200-sxm")


def _rows(device: str, n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    m, nn, k = (2.0 ** rng.integers(0, 14, n) for _ in range(3))
    return pd.DataFrame({
        "device": device, "family": "gemm", "op": "gemm", "dtype": "bf16",
        "weight_dtype": "bf16", "kv_dtype": "", "heads": np.nan, "kv_heads": np.nan, "b": 1.0,
        "m": m, "n": nn, "k": k,
        "flops": 2 * m * nn * k,
        "bytes": 2 * (m * k + nn * k + m * nn), "timing": "cuda_graph", "latency_s": 1.0})


TRUE = FamilyParams("gemm", compute_intercept={"tensor": 1.2}, power_slope=-0.4,
                    memory_intercept=2.0, bandwidth_slope=-0.3,
                    fixed_s={"gemm/bf16": 3e-6, "default": 3e-6}, smoothness=3.0)


def _synthetic(devices=DEVICES, n=400, seed=0, noise=0.0):
    parts = []
    for i, name in enumerate(devices):
        rows = _rows(name, n, seed + i)
        ops = measurement_ops(rows)
        t = evaluate(TRUE, prepare(ops, get_device(name), rows["timing"].to_numpy()))
        rng = np.random.default_rng(seed + 100 + i)
        parts.append(rows.assign(latency_s=t * np.exp(noise * rng.standard_normal(n))))
    return pd.concat(parts, ignore_index=True)


def test_fit_recovers_a_model_generated_dataset_on_an_unseen_device():
    data = _synthetic()
    cal = fit_calibration(data[data["device"] != "h200-sxm"])
    held = data[data["device"] == "h200-sxm"]
    pred = PhysicsModel(cal).kernel_times(measurement_ops(held), get_device("h200-sxm"))
    ape = np.abs(pred - held["latency_s"]) / held["latency_s"]
    assert ape.mean() < 0.02


def _beyond_and_at_edge(params: FamilyParams, device: str) -> tuple[np.ndarray, np.ndarray]:
    """`device`'s forecasts of some GEMMs, and the same with its bandwidth and FLOP/s per
    watt features moved to the nearest edge of the range the slopes were fitted over."""
    rows = _rows(device, 50, 7)
    prep = prepare(measurement_ops(rows), get_device(device), rows["timing"].to_numpy())
    bounds = params.device_range or {"log_flops_per_w": [-np.inf, np.inf],
                                     "log_bw_tbps": [-np.inf, np.inf]}
    edge = replace(prep, **{k: np.clip(getattr(prep, k), *bounds[k]) for k in bounds})
    return evaluate(params, prep), evaluate(params, edge)


def test_two_device_slopes_interpolate_only():
    """Two devices fix the power and bandwidth slopes (recovered on model-generated data), but
    only between them: a GPU beyond them is priced at the nearer one's efficiency. From
    three devices on the slopes extrapolate."""
    cal = fit_calibration(_synthetic(devices=DEVICES[:2], n=200))
    two = cal.families["gemm"]
    assert two.power_slope == pytest.approx(TRUE.power_slope, abs=1e-3)
    assert two.bandwidth_slope == pytest.approx(TRUE.bandwidth_slope, abs=1e-3)
    h200 = get_device("h200-sxm").hbm_bandwidth_bps / 1e12
    assert np.log(h200) > two.device_range["log_bw_tbps"][1]  # beyond A100 and H100
    beyond, edge = _beyond_and_at_edge(two, "h200-sxm")
    assert np.array_equal(beyond, edge)
    three = fit_calibration(_synthetic(devices=DEVICES[:3], n=200)).families["gemm"]
    assert three.device_range is None
    free, _ = _beyond_and_at_edge(three, "h200-sxm")
    bounded, _ = _beyond_and_at_edge(replace(three, device_range=two.device_range), "h200-sxm")
    assert not np.allclose(free, bounded)  # H200 priced along the slopes, past H100
    assert Calibration.from_json(cal.to_json()).families["gemm"] == two  # the range is kept


def test_one_device_fits_no_slopes():
    one = fit_calibration(_synthetic(devices=DEVICES[:1], n=200)).families["gemm"]
    assert abs(one.power_slope) < 1e-8 and abs(one.bandwidth_slope) < 1e-8


def test_target_corrections_fix_a_biased_device():
    data = _synthetic(noise=0.02)
    slow = data["device"] == "h200-sxm"
    data.loc[slow, "latency_s"] *= 1.3  # a device 30% slower than its spec sheet suggests
    cal = fit_calibration(data[~slow])
    sample = data[slow].iloc[::10]
    held = data[slow].drop(sample.index)
    device = get_device("h200-sxm")
    cross = PhysicsModel(cal).kernel_times(measurement_ops(held), device)
    tuned = add_target_corrections(cal, sample)
    target = PhysicsModel(tuned).kernel_times(measurement_ops(held), device)
    meas = held["latency_s"].to_numpy()
    assert np.mean(np.abs(target - meas) / meas) < 0.5 * np.mean(np.abs(cross - meas) / meas)
    assert tuned.tier_for("h200-sxm") == TARGET_MEASURED
    assert tuned.tier_for("b200-sxm") == CROSS_GENERATION


def test_json_round_trip_is_bit_identical():
    cal = add_target_corrections(fit_calibration(_synthetic(n=200)),
                                 _synthetic(("h200-sxm",), n=50, seed=7))
    text = cal.to_json()
    again = Calibration.from_json(text)
    assert again.to_json() == text
    ops = measurement_ops(_synthetic(("h200-sxm",), n=30, seed=9))
    device = get_device("h200-sxm")
    assert np.array_equal(PhysicsModel(cal).kernel_times(ops, device),
                          PhysicsModel(again).kernel_times(ops, device))


def test_refit_is_deterministic():
    data = _synthetic(n=150, noise=0.05)
    assert fit_calibration(data).to_json() == fit_calibration(data).to_json()


def test_schema_version_is_checked():
    from perfcast.errors import InputError

    text = fit_calibration(_synthetic(n=50)).to_json().replace('"schema_version": 1',
                                                               '"schema_version": 99')
    with pytest.raises(InputError, match="schema_version"):
        Calibration.from_json(text)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 65536), n=st.integers(1, 65536), k=st.integers(1, 65536),
       device=st.sampled_from(["h100-sxm", "b200-sxm", "mi300x", "l4"]),
       dtype=st.sampled_from(["bf16", "fp8"]))
def test_shipped_model_never_beats_the_roofline(m, n, k, device, dtype):
    dev = get_device(device)
    if dtype not in dev.dtypes:
        return
    row = pd.DataFrame([{"layer": "t", "op": "gemm", "family": "gemm", "phase": "t", "b": 1,
                         "m": float(m), "n": float(n), "k": float(k), "flops": 2.0 * m * n * k,
                         "bytes_read": 2.0 * (m * k + n * k + m * n), "bytes_written": 0.0,
                         "dtype": dtype, "count": 1}])
    t = PhysicsModel(shipped_calibration()).kernel_times(row, dev)[0]
    assert t >= roofline_times(row, dev, waves=False)[0]


def test_shipped_calibration_reloads_bit_identically():
    from importlib import resources

    text = (resources.files("perfcast.kernels") / "data" / "calibration.json").read_text()
    cal = Calibration.from_json(text)
    assert cal.to_json() == text
    assert cal.provenance["store_sha256_16"] and cal.provenance["seed"] == 0
