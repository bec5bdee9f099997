"""Issue 16: a number given for a text option (`--set prompt_tokens=2048`, an unquoted
number in a scenario YAML) is the text it spells, not "Input should be a valid string"; and
`capacity` with every candidate refused exits 2 instead of "no candidate meets the SLOs"."""

import json

from typer.testing import CliRunner

import perfcast.api as api
from perfcast.cli import app

runner = CliRunner()
CAPACITY = ["capacity", "--model", "llama-2-7b", "--gpu", "h100-sxm", "--tp", "1", "--qps",
            "1", "--num-requests", "8", "--workers", "1", "--json"]


def test_numbers_for_text_options_build():
    request = api.ServeRequest.from_options(prompt_tokens=2048, output_tokens=64,
                                            spec_acceptance=0.8)
    assert request.workload.prompt_tokens == "2048"
    assert request.speculative.spec_acceptance == "0.8"
    assert api.CollectiveRequest.from_options(op="allreduce", num_gpus=8, bytes=1e6,
                                              gpu="h100-sxm").message == "1000000.0"
    assert api.CapacityRequest.from_options(tp=4).candidates.tp == "4"


def test_capacity_set_prompt_tokens_as_a_number():
    res = runner.invoke(app, [*CAPACITY, "--set", "prompt_tokens=2048"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["chosen"] is not None and out["candidates"][0]["status"] == "ok"


def test_sweep_set_prompt_tokens_as_a_number(tmp_path):
    res = runner.invoke(app, ["sweep", "--command", "serve", "--set", "prompt_tokens=2048",
                              "--set", "qps=1", "--set", "num_requests=4", "--grid", "tp=1",
                              "--out", str(tmp_path / "s"), "--workers", "1", "--no-progress",
                              "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["ok"] == 1


def test_capacity_bad_set_value_names_it_before_any_probe():
    res = runner.invoke(app, [*CAPACITY, "--set", "prompt_tokens=lots"])
    assert res.exit_code == 2, res.output
    assert "set.prompt_tokens" in res.output


def test_capacity_with_every_candidate_refused_exits_2():
    res = runner.invoke(app, [*CAPACITY, "--set", "concurrency=4"])
    assert res.exit_code == 2, res.output
    assert "no candidate could be simulated" in res.output
    assert "no candidate meets the SLOs" not in res.output
