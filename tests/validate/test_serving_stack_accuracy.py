"""Serving forecasts with each point's kernels priced by its own framework's stack
(`validate serving --stack backend --by backend`, issue 17): per-backend regression
thresholds (serving_stack_accuracy_thresholds.json, measured on a small seeded sample,
nothing fitted to the points), and the routing itself: trtllm = today's default pricing to
the byte, vllm / sglang points priced by their own kernel tables."""

import json
from functools import cache
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.errors import InputError
from perfcast.specs import stack_names
from perfcast.validate import (
    analytic_point,
    engine_point,
    load_serving_points,
    sample_serving_points,
    validate_serving,
)
from perfcast.validate._serving import check_stack, point_stack

HERE = Path(__file__).parent
THRESHOLDS = json.loads((HERE / "serving_stack_accuracy_thresholds.json").read_text())
BACKENDS = ("trtllm", "vllm", "sglang")


@cache
def _sample() -> pd.DataFrame:
    points = load_serving_points()
    points = points[points["model"].isin(THRESHOLDS["models"])]  # the thresholds' population
    return sample_serving_points(points, THRESHOLDS["points_per_group"], THRESHOLDS["seed"])


@cache
def _rows() -> pd.DataFrame:
    return validate_serving(lambda p: engine_point(p, stack="backend"), _sample(),
                            method="perfcast", by="backend")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("metric", ["ttft", "tpot"])
def test_per_backend_median_ape_does_not_regress(backend, metric):
    rows = _rows()
    row = rows[(rows["split"] == backend) & (rows["group"] == f"{backend}/{metric}")]
    assert len(row) == 1 and row["device"].iloc[0] == "all"
    value = float(row["median_ape"].iloc[0])
    assert value <= THRESHOLDS["max_median_ape"][backend][metric], (backend, metric, value)


def test_by_backend_rows_cover_every_backend_and_the_overall():
    rows = _rows()
    assert set(rows["split"]) == {*BACKENDS, "all"}
    assert set(rows["group"]) == {f"{s}/{m}" for s in (*BACKENDS, "all")
                                  for m in ("ttft", "tpot")}
    per_backend = rows[rows["split"] != "all"]
    overall = rows[rows["split"] == "all"].set_index("group")["n"]
    for metric in ("ttft", "tpot"):  # the backends partition the simulated points
        n = per_backend[per_backend["group"].str.endswith(metric)]["n"].sum()
        assert n == overall[f"all/{metric}"]


def _first(backend: str) -> pd.Series:
    points = _sample()
    return points[(points["backend"] == backend) & (points["arch"] == "dense")].iloc[0]


def test_trtllm_stack_is_todays_pricing_to_the_byte():
    point = _first("trtllm")
    today = engine_point(point)
    assert engine_point(point, stack="trtllm") == today
    assert engine_point(point, stack="backend") == today
    assert analytic_point(point, stack="backend") == analytic_point(point)


@pytest.mark.parametrize("backend", ["vllm", "sglang"])
def test_other_backends_are_priced_by_their_own_tables(backend):
    point = _first(backend)
    own = analytic_point(point, stack="backend")
    assert own == analytic_point(point, stack=backend)
    assert own != analytic_point(point)


@settings(max_examples=30, deadline=None)
@given(backend=st.sampled_from(BACKENDS), stack=st.sampled_from([None, *stack_names()]))
def test_point_stack_follows_the_backend_column_only_when_asked(backend, stack):
    point = pd.Series({"backend": backend})
    assert point_stack(point, "backend") == backend
    assert point_stack(point, stack) == stack
    check_stack(stack)


def test_unknown_stack_is_refused_naming_the_choices():
    with pytest.raises(InputError) as err:
        check_stack("tensorrt")
    assert err.value.field == "stack" and "backend" in str(err.value)
