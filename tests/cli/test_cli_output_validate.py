"""`perfcast validate` prints its errors as tables of percents under labelled columns (issue 16,
item 3), not raw pandas frames of fractions (`roofline 0.722`); `--json` keeps the fractions."""

import re

from typer.testing import CliRunner

from perfcast.cli import app

runner = CliRunner()


def _invoke(*args: str):
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res


def _cells(out: str) -> list[list[str]]:
    """The body rows of the printed table, as their cells."""
    return [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines()
            if line.startswith("│")]


def test_training_errors_are_percents_under_a_named_metric():
    out = _invoke("validate", "training", "--method", "roofline", "--split", "all").stdout
    assert "roofline MAPE" in out and "…" not in out
    rows = _cells(out)
    assert len(rows) == 12  # 3 devices + all, x 3 metrics
    for row in rows:
        assert re.fullmatch(r"\d+\.\d%", row[-1]), row  # 0.722 -> 72.2%
    assert "target: MAPE <= 8%" in out and "too-fast share 35%-65%" in out
    assert "forecast too fast (share of rows, tokens/s): all roofline" in out


def test_serving_errors_are_percents_with_labelled_targets():
    out = _invoke("validate", "serving", "--method", "roofline", "--points-per-group", "1",
                  "--arch", "dense").stdout
    assert "roofline median APE" in out and "…" not in out
    assert "targets (median APE): TTFT <= 10%, TPOT <= 7%" in out
    assert "{'ttft'" not in out
