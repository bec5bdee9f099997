"""`perfcast train --stack hf-transformers` against the single-H100 HF training iterations
in docs/validation/gpu_check (scripts/gpu_train_check.py; never fitted): the error
thresholds pin today's accuracy so a regression fails CI. Held-out rows were measured after
the model they check was written (docs/validation/gpu_check/h100_train.md)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKS = [ROOT / "docs/validation/gpu_check" / f"h100_train_{name}.json"
          for name in ("check", "profile", "heldout")]
REPORT = runpy.run_path(str(ROOT / "scripts/gpu_train_report.py"))


@pytest.fixture(scope="module")
def llm_rows():
    table = REPORT["measured"](CHECKS)
    return REPORT["priced"](table[table["what"] == "train_llm"], "h100-sxm", "hf-transformers")


def _ape(rows, method: str):
    return ((rows[f"{method}_s"] - rows["measured_s"]).abs() / rows["measured_s"])


@pytest.mark.parametrize("heldout, mape, median", [(0, 0.10, 0.10), (1, 0.13, 0.10)])
def test_eager_training_forecasts_stay_within_their_measured_error(llm_rows, heldout, mape,
                                                                   median):
    rows = llm_rows[llm_rows["heldout"] == heldout]
    ape = _ape(rows, "calibrated")
    assert len(rows) == (7 if heldout else 9)  # set 1 held out; set 0 seen while modelling
    assert ape.mean() <= mape and ape.median() <= median
    # beside the roofline of the same op table and host model, the calibrated kernels win
    assert ape.mean() < _ape(rows, "roofline").mean()


def test_forecasts_are_not_one_sided(llm_rows):
    too_fast = (llm_rows["calibrated_s"] < llm_rows["measured_s"]).mean()
    assert 0.3 <= too_fast <= 0.7


@pytest.mark.parametrize("heldout, mape", [(0, 0.10), (1, 0.14)])
def test_eager_training_memory_stays_within_its_measured_error(llm_rows, heldout, mape):
    rows = llm_rows[llm_rows["heldout"] == heldout]
    error = (rows["forecast_memory_bytes"] - rows["peak_allocated_bytes"]).abs()
    assert (error / rows["peak_allocated_bytes"]).mean() <= mape


def test_resnet_training_stays_within_its_measured_error():
    # fp32 convs in TF32 as PyTorch runs them (205 ms forecast before, 71.5 ms measured);
    # strict fp32 and channels_last are no options of `train`, so they are not scored
    table = REPORT["measured"](CHECKS)
    rows = table[(table["what"] == "train_resnet") & REPORT["expressible"](table)]
    rows = REPORT["priced"](rows, "h100-sxm", "hf-transformers")
    assert len(rows) == 3 and _ape(rows, "calibrated").mean() <= 0.40
