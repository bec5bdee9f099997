import json

from typer.testing import CliRunner

from perfcast.cli import app

runner = CliRunner()


def test_bad_choices_name_their_option():
    for args, field in ((["--by", "precision"], "by"), (["--method", "oracle"], "method")):
        res = runner.invoke(app, ["validate", "training", *args])
        assert res.exit_code == 2 and field in res.stderr, res.output


def test_json_rows_per_scale_bucket():
    res = runner.invoke(app, ["validate", "training", "--method", "roofline", "--by", "scale",
                              "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    rows = out["rows"]
    assert out["target_mape"] == 0.08
    assert out["target_under_predicted"] == [0.35, 0.65]
    assert {r["method"] for r in rows} == {"roofline"}
    assert {r["by"] for r in rows} == {"scale"}
    keys = {"split", "device", "group", "method", "mape", "p90_ape", "n"}
    assert all(keys <= set(r) for r in rows)
    overall = {r["group"]: r["n"] for r in rows if r["device"] == "all"}
    assert overall["gpus<=8/tokens_per_s"] + overall["gpus16-64/tokens_per_s"] \
        + overall["gpus>=128/tokens_per_s"] == 216
