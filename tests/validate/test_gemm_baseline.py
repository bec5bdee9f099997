"""The shipped AIConfigurator GEMM slice and the plain-roofline baseline measured on it."""

from importlib import resources

import numpy as np
import pytest

from perfcast.kernels import roofline_times
from perfcast.specs import get_device
from perfcast.validate import gemm_baseline, gemm_ops, load_gemm_slice

SLICE_COLUMNS = [
    "source",
    "system",
    "device",
    "dtype",
    "m",
    "n",
    "k",
    "latency_s",
    "timing",
    "source_file",
]

# Plain-roofline (waves=False) MAPE per (device, dtype) measured on the shipped slice when it
# was built. This is the baseline the fitted kernel model must beat; the band below only
# guards against an accidental change to the slice, the op rows or the roofline itself.
ROOFLINE_MAPE = {
    ("a100-sxm4-80gb", "bf16"): 0.526,
    ("b200-sxm", "bf16"): 0.595,
    ("b200-sxm", "fp8"): 0.811,
    ("b200-sxm", "fp4"): 0.831,
    ("b300-sxm", "bf16"): 0.530,
    ("b300-sxm", "fp8"): 0.784,
    ("b300-sxm", "fp4"): 0.850,
    ("gb200", "bf16"): 0.562,
    ("gb200", "fp8"): 0.800,
    ("gb200", "fp4"): 0.820,
    ("gb300", "bf16"): 0.540,
    ("gb300", "fp8"): 0.787,
    ("gb300", "fp4"): 0.857,
    ("h100-sxm", "bf16"): 0.426,
    ("h100-sxm", "fp8"): 0.711,
    ("h200-sxm", "bf16"): 0.504,
    ("h200-sxm", "fp8"): 0.697,
    ("l40s", "bf16"): 0.425,
    ("l40s", "fp8"): 0.582,
    ("rtx-pro-6000", "bf16"): 0.369,
    ("rtx-pro-6000", "fp8"): 0.600,
    ("rtx-pro-6000", "fp4"): 0.656,
}


@pytest.fixture(scope="module")
def slice_df():
    return load_gemm_slice()


@pytest.fixture(scope="module")
def baseline(slice_df):
    return gemm_baseline(slice_df)


def test_slice_columns_and_provenance(slice_df):
    assert list(slice_df.columns) == SLICE_COLUMNS
    assert 0 < len(slice_df) <= 9000
    assert set(slice_df["source"]) == {"aiconfigurator"}
    assert set(slice_df["timing"]) == {"cuda_graph"}
    assert set(slice_df["dtype"]) <= {"bf16", "fp8", "fp4"}
    assert (slice_df["latency_s"] > 0).all() and (slice_df[["m", "n", "k"]] > 0).all().all()
    prefix = "aiconfigurator/systems/data/" + slice_df["system"] + "/gemm/"
    paths = slice_df["source_file"]
    assert all(p.startswith(q) for p, q in zip(paths, prefix, strict=True))
    assert paths.str.endswith("/gemm_perf.parquet").all()
    assert slice_df["m"].min() == 1 and slice_df["m"].max() >= 8192  # both regimes sampled
    readme = (resources.files("perfcast.validate") / "data" / "README.md").read_text()
    assert "095f58a51c4c" in readme and "Apache-2.0" in readme


def test_baseline_covers_every_device(slice_df, baseline):
    assert set(baseline["device"]) == set(slice_df["device"])
    assert set(baseline["method"]) == {"roofline", "roofline_waves"}
    assert list(baseline.columns) == ["split", "device", "group", "method", "mape", "p90_ape", "n"]
    assert (baseline["split"] == "all").all() and (baseline["n"] > 0).all()
    assert np.isfinite(baseline[["mape", "p90_ape"]].to_numpy()).all()


def test_predictions_positive_and_finite(slice_df):
    for name, rows in slice_df.groupby("device"):
        device = get_device(name)
        rows = rows[rows["dtype"].isin([d.value for d in device.dense_peak_flops])]
        for waves in (False, True):
            pred = roofline_times(gemm_ops(rows), device, waves=waves)
            assert len(pred) == len(rows)
            assert np.isfinite(pred).all() and (pred > 0).all()


def test_roofline_mape_regression_band(baseline):
    roof = baseline[baseline["method"] == "roofline"]
    got = {(r.device, r.group.removeprefix("gemm/")): r.mape for r in roof.itertuples()}
    assert set(got) == set(ROOFLINE_MAPE)
    for key, ref in ROOFLINE_MAPE.items():
        assert 0.5 * ref <= got[key] <= 1.5 * ref, (key, got[key], ref)
