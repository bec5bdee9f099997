"""`perfcast.api` for `cpu` (scenario X5): the request's defaults are the CLI's, checks are
InputErrors naming the option, and the CLI prints the payload of the result `run` returns.

`cpu` measures this machine, so two runs never agree to the last digit: the CLI is checked
against one measured result (the registered command answers with it) instead of a rerun."""

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from perfcast.api import COMMANDS, CpuRequest, CpuResult, resolve, run
from perfcast.cli import app
from perfcast.errors import InputError

pytestmark = pytest.mark.cpu_timing  # run alone, after the rest (tests/conftest.py)


def test_defaults_are_the_cli_defaults():
    request = CpuRequest()
    assert request.options() == {"model": "resnet18", "batch": 1, "seq_len": 128,
                                 "quick": False, "repeats": None, "seed": 0}


@pytest.mark.parametrize("quick, repeats", [(False, 5), (True, 3)])
def test_resolve_picks_the_repeats(quick, repeats):
    pytest.importorskip("torch")
    assert resolve(CpuRequest(measurement={"quick": quick})).repeats == repeats


@pytest.mark.parametrize("options, field, text", [
    ({"model": "resnet19"}, "model", "did you mean resnet18"),
    ({"batch": 0}, "batch", "must be in [1, 64]"),
    ({"model": "small-transformer", "seq_len": 4096}, "seq_len", "must be in [1, 1024]"),
    ({"repeats": 101}, "repeats", "must be in [1, 100]"),
])
def test_bad_input_names_the_option(options, field, text):
    with pytest.raises(InputError) as err:
        resolve(CpuRequest.from_options(options))
    assert err.value.field == field and text in str(err.value)


def test_the_cli_prints_the_payload_of_the_run(monkeypatch):
    pytest.importorskip("torch")
    request = CpuRequest.from_options(model="resnet18", quick=True)
    result = run(request)
    assert isinstance(result, CpuResult) and result.repeats == 3
    assert result.tier == "target_measured" and result.error == pytest.approx(
        (result.predicted_s - result.measured_s) / result.measured_s)
    asked = []

    def answer(resolved):
        asked.append(resolved.request)
        return result

    monkeypatch.setitem(COMMANDS, "cpu", replace(COMMANDS["cpu"], execute=answer))
    res = CliRunner().invoke(app, ["cpu", "--quick", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == json.loads(json.dumps(result.payload()))
    table = CliRunner().invoke(app, ["cpu", "--quick"])
    assert table.exit_code == 0 and "predicted ms" in table.stdout
    assert asked == [request, request]
