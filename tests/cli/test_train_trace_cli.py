"""`perfcast train ... --trace-out FILE`: a Perfetto trace of the forecast iteration."""

import json

from typer.testing import CliRunner

from perfcast.cli import app

runner = CliRunner()
ARGS = ["train", "--model", "gpt2", "--gpu", "a100-sxm4-80gb", "--num-gpus", "4", "--pp", "4",
        "--global-batch", "8", "--seq-len", "512", "--json"]


def test_trace_out_writes_the_iteration_as_chrome_trace(tmp_path):
    path = tmp_path / "train.json"
    res = runner.invoke(app, [*ARGS, "--trace-out", str(path)])
    assert res.exit_code == 0, res.output
    forecast = json.loads(res.stdout)
    trace = json.loads(path.read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert all({"ph", "ts", "dur", "pid", "tid", "name"} <= set(e) for e in spans)
    assert [e["ts"] for e in spans] == sorted(e["ts"] for e in spans)
    tasks = [e for e in spans if e["cat"] in ("forward", "backward")]
    assert len(tasks) == 2 * 4 * 8  # stages x micro-batches x (forward, backward)
    end_us = max(e["ts"] + e["dur"] for e in spans)
    assert abs(end_us / 1e6 - forecast["iteration_time_s"]) < 1e-9
    for tid in {e["tid"] for e in spans}:  # spans of one track never overlap
        track = [e for e in spans if e["tid"] == tid]
        assert all(a["ts"] + a["dur"] <= b["ts"] + 1e-6
                   for a, b in zip(track, track[1:], strict=False))


def test_trace_out_refuses_an_existing_file_and_the_sweep(tmp_path):
    path = tmp_path / "taken.json"
    path.write_text("{}")
    res = runner.invoke(app, [*ARGS, "--trace-out", str(path)])
    assert res.exit_code == 2 and "trace_out" in res.output and path.read_text() == "{}"
    res = runner.invoke(app, [*ARGS, "--sweep", "--trace-out", str(tmp_path / "new.json")])
    assert res.exit_code == 2 and res.output.startswith("error: trace_out")
