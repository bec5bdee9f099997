"""`perfcast run FILE.yaml`: a target path that names no key of a run's payload is a scenario
error (exit 2, with the closest keys), while a metric the command printed as null stays
`partial` (exit 0)."""

import json

from typer.testing import CliRunner

from perfcast.cli import app

runner = CliRunner()

SCENARIO = """
id: mine
title: GPT-2 on one H100
command: infer
model: gpt2
hardware: {{gpu: h100-sxm}}
targets:
  - {{name: TTFT, path: ttft_s}}
  - {{name: other, path: {path}}}
"""


def _run(tmp_path, path: str, *args: str):
    f = tmp_path / "mine.yaml"
    f.write_text(SCENARIO.format(path=path))
    return runner.invoke(app, ["run", str(f), *args])


def test_a_misspelt_target_path_is_an_error_naming_the_target_and_closest_keys(tmp_path):
    res = _run(tmp_path, "ttft_p99")  # the payload has ttft_s, tpot_s
    assert res.exit_code == 2, res.output
    line = res.stderr.strip()
    assert line.startswith("error: targets.other: path 'ttft_p99' names no key")
    assert "ttft_s" in line and "Traceback" not in res.output
    nested = _run(tmp_path, "breakdown.prefill.family.gemmm")
    assert nested.exit_code == 2 and "breakdown.prefill.family.gemm" in nested.stderr


def test_a_metric_printed_as_null_stays_partial(tmp_path):
    res = _run(tmp_path, "context_parallel", "--json")  # null without --cp
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["status"] == "partial"
    res = _run(tmp_path, "tpot_s", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["status"] == "supported"
