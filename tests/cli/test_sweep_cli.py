import json

import pytest
from typer.testing import CliRunner

from perfcast.cli import app

runner = CliRunner()
GRID = ["--command", "collective", "--set", "gpu=h100-sxm", "--set", "bytes=1GB", "--grid",
        "op=allreduce,allgather", "--grid", "num_gpus=2,8", "--workers", "1", "--no-progress"]


def _sweep(out, *args):
    return runner.invoke(app, ["sweep", *GRID, "--out", str(out), *args])


def test_sweep_json_then_resume_reuses_every_point(tmp_path):
    first = _sweep(tmp_path, "--json")
    assert first.exit_code == 0, first.output
    payload = json.loads(first.stdout)
    assert (payload["points"], payload["ok"], payload["computed"]) == (4, 4, 4)
    assert [(r["in.op"], r["in.num_gpus"]) for r in payload["rows"]] == [
        ("allreduce", 2), ("allreduce", 8), ("allgather", 2), ("allgather", 8)]
    assert all(r["out.time_s"] > 0 for r in payload["rows"])
    again = json.loads(_sweep(tmp_path, "--json").stdout)
    assert (again["computed"], again["reused"]) == (0, 4)
    assert again["rows"] == payload["rows"]


def test_sweep_table_names_the_results(tmp_path):
    res = _sweep(tmp_path)
    assert res.exit_code == 0, res.output
    assert "in.num_gpus" in res.output and "out.busbw_gbps" in res.output
    assert "results.parquet" in res.output


def test_a_bad_point_is_an_error_row_not_a_failed_sweep(tmp_path):
    res = runner.invoke(app, ["sweep", "--command", "collective", "--set", "bytes=1MB",
                              "--set", "op=allreduce", "--set", "num_gpus=8", "--grid",
                              "gpu=h100-sxm,h100x", "--out", str(tmp_path), "--workers", "1",
                              "--no-progress", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["rows"]
    assert [r["status"] for r in rows] == ["ok", "error"]
    assert rows[1]["error"].startswith("gpu")


def test_query_sql_table_json_and_csv(tmp_path):
    assert _sweep(tmp_path).exit_code == 0
    sql = ('SELECT "in.op" AS op, count(*) AS n, max("out.time_s") AS t FROM results '
           'GROUP BY 1 ORDER BY 1')
    out = json.loads(runner.invoke(app, ["query", str(tmp_path), sql, "--json"]).stdout)
    assert out["columns"] == ["op", "n", "t"]
    assert [(r["op"], r["n"]) for r in out["rows"]] == [("allgather", 2), ("allreduce", 2)]
    csv = runner.invoke(app, ["query", str(tmp_path / "results.parquet"), sql, "--csv"])
    assert csv.stdout.splitlines()[0] == "op,n,t" and len(csv.stdout.splitlines()) == 3
    table = runner.invoke(app, ["query", str(tmp_path)])
    assert table.exit_code == 0 and "4 rows" in table.output
    bad = runner.invoke(app, ["query", str(tmp_path), "SELEC 1"])
    assert bad.exit_code == 2 and bad.output.startswith("error: sql: Parser Error")


def test_query_reads_the_parts_of_an_unfinished_sweep(tmp_path):
    assert _sweep(tmp_path).exit_code == 0
    (tmp_path / "results.parquet").unlink()
    out = runner.invoke(app, ["query", str(tmp_path), "SELECT count(*) AS n FROM results",
                              "--json"])
    assert json.loads(out.stdout)["rows"] == [{"n": 4}]


@pytest.mark.parametrize("args,message", [
    (["query", "{out}/missing"], "source:"),
    (["sweep", "--command", "collective", "--grid", "num_gpu=2,4", "--out", "{out}"],
     "did you mean num_gpus"),
    (["sweep", "--command", "colective", "--out", "{out}"], "did you mean collective"),
    (["sweep", "--out", "{out}"], "command:"),
    (["sweep", "--command", "collective", "--grid", "num_gpus", "--out", "{out}"], "grid:"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    res = runner.invoke(app, [a.format(out=tmp_path) for a in args])
    assert res.exit_code == 2 and message in res.output, res.output


SCENARIO = """\
id: my-allreduce
title: All-reduce across one node
command: collective
hardware: {gpu: h100-sxm, num_gpus: 8}
workload: {op: allreduce, bytes: 1GB}
targets: [{name: time, path: time_s}]
"""


def test_sweep_over_a_scenario_file(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    res = runner.invoke(app, ["sweep", str(path), "--grid", "num_gpus=2,8", "--out",
                              str(tmp_path / "out"), "--workers", "1", "--no-progress",
                              "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["rows"]
    assert [r["in.num_gpus"] for r in rows] == [2, 8]
    assert rows[0]["out.time_s"] < rows[1]["out.time_s"]  # 1 GB over 2 vs 8 GPUs' ring
    direct = json.loads(runner.invoke(app, ["collective", "--gpu", "h100-sxm", "--num-gpus", "8",
                                            "--op", "allreduce", "--bytes", "1GB",
                                            "--json"]).stdout)
    assert rows[1]["out.time_s"] == direct["time_s"]


def test_capacity_picks_the_cheapest_and_prices_it(tmp_path):
    prices = tmp_path / "p.json"
    prices.write_text(json.dumps({"h100-sxm": {"usd_per_gpu_hour": 1.5, "as_of": "2026"}}))
    res = runner.invoke(app, ["capacity", "--model", "llama-2-7b", "--gpu", "h100-sxm", "--tp",
                              "1,2", "--qps", "2", "--num-requests", "20", "--workers", "1",
                              "--prices", str(prices), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["prices"]["h100-sxm"] == {"usd_per_gpu_hour": 1.5, "source": str(prices),
                                         "as_of": "2026"}
    tp1, tp2 = out["candidates"]
    assert tp1["status"] == tp2["status"] == "ok"
    assert tp1["replicas"] == tp2["replicas"] == 1  # a 7B model at 2 req/s
    assert out["chosen"] == tp1 and tp1["config"] == "1 x TP1 h100-sxm"
    assert (tp1["usd_per_hour"], tp2["usd_per_hour"]) == (1.5, 3.0)
    tokens_per_hour = 2 * tp1["output_tokens_per_request"] * 3600
    assert tp1["output_tokens_per_request"] == pytest.approx(128)  # serve's default lengths
    assert tp1["usd_per_million_output_tokens"] == pytest.approx(1.5 / (tokens_per_hour / 1e6))
    assert tp1["ttft_p99_s"] <= 1 and tp1["tpot_p99_s"] <= 0.05
    assert tp2["tpot_p99_s"] < tp1["tpot_p99_s"]
    assert out["pareto"] == {"ttft": [0, 1], "tpot": [0, 1]}


@pytest.mark.parametrize("args,message", [
    (["--prices", "{p}"],
     "prices.h100-sxmm: unknown gpu or cpu device 'h100-sxmm'; did you mean h100-sxm"),
    (["--set", "tp=2"], "set.tp"),
    (["--set", "qpss=2"], "did you mean qps"),
    (["--gpu", "h100-sxmm"], "h100-sxm"),
    (["--tp", "two"], "tp:"),
    (["--gpu", "h200-sxm"], "no price for h200-sxm"),
])
def test_capacity_bad_input(tmp_path, args, message):
    prices = tmp_path / "p.json"
    prices.write_text(json.dumps({"h100-sxmm": {"usd_per_gpu_hour": 1.0}}))
    res = runner.invoke(app, ["capacity", *[a.format(p=prices) for a in args]])
    assert res.exit_code == 2 and message in res.output, res.output
