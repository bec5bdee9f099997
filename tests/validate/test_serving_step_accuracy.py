"""Composed layer times against Vidur's and AIConfigurator's measured ops; fails when a
headline figure regresses past tests/validate/serving_step_accuracy_thresholds.json.

Runs on the shipped measured layer points (validate/data/serving_step_points.csv, derived by
scripts/build_serving_step_points.py). The full table is docs/validation/serving_step.md."""

import json
from pathlib import Path

import pytest

from perfcast.validate import validate_serving_steps

THRESHOLDS = json.loads((Path(__file__).parent / "serving_step_accuracy_thresholds.json")
                        .read_text())


@pytest.fixture(scope="module")
def summary():
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
    rows = validate_serving_steps(points_per_group=2)
    assert list(rows.columns) == ["split", "device", "group", "method", "mape", "p90_ape", "n"]
    assert set(rows["method"]) == {"roofline", "perfcast:target_measured"}
