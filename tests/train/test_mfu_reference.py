"""The shipped best-published-MFU table (perfcast.train data/mfu_reference.json): every row
sourced, and a forecast above its class's best says so by name; one with no class row says
nothing."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from perfcast.cli import app
from perfcast.specs import ParallelPlan, get_cluster, get_model
from perfcast.train import TrainJob, forecast_training, mfu_ceiling
from perfcast.train._forecast import _mfu_note, mfu_reference, model_class

ARCHS = {"Ampere", "Hopper", "Blackwell"}
CLASSES = {"dense-small", "dense-medium", "dense-large", "moe"}


def test_every_row_is_sourced_and_in_range():
    rows = mfu_reference()
    assert rows
    for row in rows:
        assert row["model_class"] in CLASSES and row["arch"] in ARCHS
        assert row["dtype"] in {"bf16", "fp8", "any"}
        assert 0 < row["mfu"] < 1
        assert row["url"].startswith("https://")
        for key in ("model", "source", "figure", "mfu_counting"):
            assert row[key].strip(), key


def _job(model: str, gpu: str, gpus: int = 8, **kw) -> TrainJob:
    return TrainJob(model=get_model(model), cluster=get_cluster(gpu, gpus),
                    plan=ParallelPlan(dp=gpus, zero_stage=3), seq_len=2048, micro_batch=1,
                    global_batch=gpus, **kw)


def test_classes_follow_the_model():
    assert model_class(_job("gpt2-medium", "dgx-h100")) == "dense-small"
    assert model_class(_job("llama-3-70b", "dgx-h100")) == "dense-medium"
    assert model_class(_job("mixtral-8x7b", "dgx-h100")) == "moe"


def test_the_best_row_of_the_class_is_the_ceiling():
    best = mfu_ceiling(_job("gpt2-medium", "dgx-h100"))
    assert best["model_class"] == "dense-small" and best["arch"] == "Hopper"
    same = [r["mfu"] for r in mfu_reference() if r["model_class"] == "dense-small"
            and r["arch"] == "Hopper" and r["dtype"] in ("bf16", "any")]
    assert best["mfu"] == max(same)


def test_an_mfu_above_the_best_published_adds_a_note_naming_it():
    job = _job("gpt2-medium", "dgx-h100")
    best = mfu_ceiling(job)
    note = _mfu_note(job, best["mfu"] + 0.05)
    assert best["url"] in note and best["source"] in note and "best published" in note
    assert _mfu_note(job, best["mfu"] - 0.05) is None


def test_a_class_without_a_reference_says_nothing():
    job = _job("gpt2-medium", "mi300x-x8")  # no CDNA3 row in the table
    assert mfu_ceiling(job) is None
    assert _mfu_note(job, 0.99) is None
    assert not [n for n in forecast_training(job).notes if "best published" in n]


def test_a_forecast_above_the_ceiling_carries_the_note_and_the_cli_prints_it(monkeypatch):
    import perfcast.train._forecast as forecast_module

    low = tuple({**row, "mfu": 0.01} for row in mfu_reference())
    monkeypatch.setattr(forecast_module, "mfu_reference", lambda: low)
    fc = forecast_training(_job("gpt2-medium", "dgx-h100"))
    assert [n for n in fc.notes if "best published" in n]
    res = CliRunner().invoke(app, ["train", "--model", "gpt2-medium", "--gpu", "h100-sxm",
                                   "--num-gpus", "8"], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert "best published" in res.output


@pytest.mark.parametrize("gpu", ["dgx-a100", "dgx-h100"])
def test_shipped_forecasts_of_small_models_stay_below_the_ceiling(gpu):
    fc = forecast_training(_job("gpt2-medium", gpu))
    assert fc.mfu < mfu_ceiling(_job("gpt2-medium", gpu))["mfu"]
    assert not [n for n in fc.notes if "best published" in n]
