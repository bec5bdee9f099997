"""`perfcast suite` and `perfcast run`: coverage table, report files, user scenarios."""

import json

from typer.testing import CliRunner

from perfcast.cli import app

runner = CliRunner()


def test_suite_subset_writes_markdown_and_json(tmp_path):
    out = tmp_path / "report"
    res = runner.invoke(app, ["suite", "--only", "I1.1,T1.1", "--workers", "1", "--out",
                              str(out)])
    assert res.exit_code == 0, res.output
    assert "2/2 supported" in res.stdout
    data = json.loads((out / "suite.json").read_text())
    assert data["counts"] == {"supported": 2, "partial": 0, "unsupported": 0}
    assert [r["id"] for r in data["results"]] == ["I1.1", "T1.1"]
    md = (out / "suite.md").read_text()
    assert "| I1.1 |" in md and "TTFT = " in md
    assert not list(out.glob(".*.tmp"))  # written atomically, no leftovers


def test_suite_rejects_unknown_ids_and_a_file_as_out(tmp_path):
    res = runner.invoke(app, ["suite", "--only", "I1.9"])
    assert res.exit_code == 2 and "only: unknown scenario 'I1.9'" in res.stderr
    (tmp_path / "f").write_text("mine")
    res = runner.invoke(app, ["suite", "--only", "I1.1", "--out", str(tmp_path / "f")])
    assert res.exit_code == 2 and "out:" in res.stderr
    assert (tmp_path / "f").read_text() == "mine"


def test_run_a_user_scenario(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("id: mine\ntitle: 7B on H100\ncommand: infer\nmodel: llama-2-7b\n"
                 "hardware: {gpu: h100-sxm}\nvariants: {tp1: {tp: 1}, tp2: {tp: 2}}\n"
                 "targets: [{name: TTFT, path: ttft_s}, {name: TPOT, path: tpot_s}]\n")
    res = runner.invoke(app, ["run", str(f), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["status"] == "supported"
    tpot = {v["run"]: v["value"] for v in data["values"] if v["name"] == "TPOT"}
    assert tpot["tp2"] < tpot["tp1"]


def test_run_reports_a_bad_option_by_name_and_exits_2(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("id: bad\ntitle: t\ncommand: infer\nmodel: llama-2-7b\n"
                 "hardware: {gpu: h100-sxm}\nplan: {tpp: 2}\n"
                 "targets: [{name: TTFT, path: ttft_s}]\n")
    res = runner.invoke(app, ["run", str(f)])
    assert res.exit_code == 2
    assert "tpp: infer has no option 'tpp'; did you mean tp?" in res.stderr
