"""Continuous validation: refit on a fixed seed and subsample, fail when a headline figure
regresses past the committed threshold (tests/validate/kernel_accuracy_thresholds.json).

The full validation is `perfcast validate kernels`; this is its CI-sized cut (the generation
split and NeuSight's GPU split, with fewer rows per group)."""

import json
from pathlib import Path

import pytest

from perfcast.measure import load_store
from perfcast.validate import summarise, validate_kernels

THRESHOLDS = json.loads((Path(__file__).parent / "kernel_accuracy_thresholds.json").read_text())


@pytest.fixture(scope="module")
def summary():
    rows = validate_kernels(load_store(), ["generation", "neusight"],
                            train_per_group=THRESHOLDS["train_per_group"],
                            test_per_group=THRESHOLDS["test_per_group"], seed=0)
    return summarise(rows).set_index(["split", "method"])


@pytest.mark.parametrize("key", sorted(THRESHOLDS["max_median_family_mape"]))
def test_headline_mape_does_not_regress(summary, key):
    split, method = key.split("/")
    value = summary.loc[(split, method), "median_family_mape"]
    assert value <= THRESHOLDS["max_median_family_mape"][key], f"{key}: {value:.3f}"


@pytest.mark.parametrize("split", ["generation", "neusight"])
def test_fitted_tiers_beat_the_roofline(summary, split):
    roofline = summary.loc[(split, "roofline"), "pooled_mape"]
    assert summary.loc[(split, "target_measured"), "pooled_mape"] < roofline
