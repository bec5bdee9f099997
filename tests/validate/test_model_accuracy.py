"""Continuous validation of composition: whole-model forecasts against NeuSight's measured
model times (nothing fitted to them). Fails when a device's MAPE or interval coverage
regresses past tests/validate/model_accuracy_thresholds.json; the full report is
`perfcast validate models`."""

import json
from pathlib import Path

import pytest

from perfcast.validate import validate_models

THRESHOLDS = json.loads((Path(__file__).parent / "model_accuracy_thresholds.json").read_text())


@pytest.fixture(scope="module")
def rows():
    return validate_models(per_op=True)[0]


def _perfcast(rows):
    e2e = rows[(rows["split"] == "models") & (rows["group"] == "all")]
    return e2e[e2e["method"].isin(["target_measured", "cross_generation"])].set_index("device")


@pytest.mark.parametrize("device", sorted(THRESHOLDS["max_mape"]))
def test_model_mape_does_not_regress(rows, device):
    mape = _perfcast(rows).loc[device, "mape"]
    assert mape <= THRESHOLDS["max_mape"][device], f"{device}: {mape:.3f}"


def test_composition_beats_the_roofline(rows):
    """Pooled over all configurations, and on each device listed in the thresholds."""
    e2e = rows[(rows["split"] == "models") & (rows["group"] == "all")]
    wide = e2e.pivot_table(index="device", columns="method", values="mape")
    n = e2e.groupby("device")["n"].max()
    tier = wide[["target_measured", "cross_generation"]].min(axis=1)
    assert (tier * n).sum() < (wide["roofline"] * n).sum()
    beats = THRESHOLDS["beats_roofline"]
    assert (tier[beats] < wide.loc[beats, "roofline"]).all(), wide


def test_interval_coverage_does_not_regress(rows):
    p = _perfcast(rows)
    pooled = float((p["coverage_90"] * p["n"]).sum() / p["n"].sum())
    assert pooled >= THRESHOLDS["min_pooled_coverage_90"], pooled


def test_rows_have_the_validate_kernels_form(rows):
    assert {"split", "device", "group", "method", "mape", "p90_ape", "n"} <= set(rows.columns)
    assert set(rows["split"]) == {"models", "per_op"}
    assert rows["mape"].between(0, 10).all()


def _learned(rows):
    e2e = rows[(rows["split"] == "models") & (rows["group"] == "all")]
    return e2e[e2e["method"] == "learned"].set_index("device")


@pytest.mark.parametrize("device", sorted(THRESHOLDS["learned_max_mape"]))
def test_learned_model_mape_does_not_regress(rows, device):
    """Issue 18: whole-model accuracy with --kernel-model learned (and never worse than the
    calibrated tier by more than the thresholds' headroom)."""
    mape = _learned(rows).loc[device, "mape"]
    assert mape <= THRESHOLDS["learned_max_mape"][device], f"{device}: {mape:.3f}"
    assert mape <= _perfcast(rows).loc[device, "mape"] + 0.02


def test_learned_interval_coverage_does_not_regress(rows):
    p = _learned(rows)
    pooled = float((p["coverage_90"] * p["n"]).sum() / p["n"].sum())
    assert pooled >= THRESHOLDS["learned_min_pooled_coverage_90"], pooled


def test_cli_table_shows_the_learned_method_and_both_coverages():
    """`perfcast validate models` prints one row per device x group with the calibrated
    tier's and the learned model's interval coverage in their own columns."""
    from typer.testing import CliRunner

    from perfcast.cli import app

    out = CliRunner().invoke(app, ["validate", "models", "--no-per-op"], terminal_width=250)
    assert out.exit_code == 0, out.output
    assert "learned coverage" in out.output and "90% coverage" in out.output
