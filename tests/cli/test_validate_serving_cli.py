import json

from typer.testing import CliRunner

from perfcast.cli import app
from perfcast.validate import load_serving_points, sample_serving_points

runner = CliRunner()


def test_held_out_sample_leaves_the_excluded_points_out():
    args = ["validate", "serving", "--method", "roofline", "--points-per-group", "1", "--json",
            "--arch", "dense"]
    points = load_serving_points()
    points = points[points["arch"] == "dense"]
    seen = sample_serving_points(points, 1, 0)["point_id"]
    rest = points[~points["point_id"].isin(seen)]  # groups of one point drop out entirely
    res = runner.invoke(app, [*args, "--seed", "1", "--exclude-seed", "0"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["rows"]
    overall = [r for r in rows if r["split"] == "all" and r["group"] == "all/ttft"]
    assert overall and overall[0]["n"] == len(sample_serving_points(rest, 1, 1)) < len(seen)
    bad = runner.invoke(app, ["validate", "serving", "--exclude-seed", "0"])
    assert bad.exit_code == 2 and "exclude_seed" in bad.stderr


def test_by_backend_prints_each_backend_and_refuses_an_unknown_stack():
    args = ["validate", "serving", "--method", "roofline", "--points-per-group", "1",
            "--arch", "dense", "--by", "backend", "--stack", "backend"]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    assert payload["by"] == "backend" and payload["stack"] == "backend"
    assert {r["split"] for r in payload["rows"]} == {"trtllm", "vllm", "sglang", "all"}
    table = runner.invoke(app, args)
    assert table.exit_code == 0 and "roofline P90" in table.stdout, table.output
    bad = runner.invoke(app, ["validate", "serving", "--stack", "tensorrt"])
    assert bad.exit_code == 2 and "stack" in bad.stderr and "backend" in bad.stderr
