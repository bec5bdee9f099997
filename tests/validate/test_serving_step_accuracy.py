"""Composed layer times against Vidur's and AIConfigurator's measured ops; fails when a
headline figure regresses past tests/validate/serving_step_accuracy_thresholds.json.

Needs the shared measurement folder (../shared/data or $PERFCAST_DATA_DIR); skipped without
it. The full table is docs/validation/serving_step.md."""

import json
from pathlib import Path

import pytest

from perfcast.validate import validate_serving_steps
from perfcast.validate._serving_step import default_data_dir

THRESHOLDS = json.loads((Path(__file__).parent / "serving_step_accuracy_thresholds.json")
                        .read_text())


@pytest.fixture(scope="module")
def summary():
    if not (default_data_dir() / "vidur-profiling").is_dir():
        pytest.skip("shared measurement data not present")
    rows = validate_serving_steps(points_per_group=THRESHOLDS["points_per_group"])
    rows["kind"] = rows["method"].str.split(":").str[0]
    return rows.groupby(["split", "kind"])["mape"].median()


@pytest.mark.parametrize("key", sorted(THRESHOLDS["max_median_mape"]))
def test_layer_mape_does_not_regress(summary, key):
    split, kind = key.split("/")
    assert summary.loc[(split, kind)] <= THRESHOLDS["max_median_mape"][key], key


def test_calibrated_beats_the_roofline(summary):
    for split in {s for s, _ in summary.index}:
        assert summary.loc[(split, "perfcast")] < summary.loc[(split, "roofline")], split


def test_rows_have_the_kernel_validation_form():
    if not (default_data_dir() / "aiconfigurator").is_dir():
        pytest.skip("shared measurement data not present")
    rows = validate_serving_steps(sources=("aiconfigurator",), points_per_group=2)
    assert list(rows.columns) == ["split", "device", "group", "method", "mape", "p90_ape", "n"]
    assert set(rows["method"]) == {"roofline", "perfcast:target_measured"}
