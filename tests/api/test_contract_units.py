"""Issue 16: SLOs with explicit units. vLLM and AIConfigurator take milliseconds, perfcast
seconds: `500ms` and `0.5s` both work, a bare number is seconds, and a bare number that can
only be milliseconds is refused instead of read as minutes of latency."""

import pytest
from typer.testing import CliRunner

import perfcast.api as api
from perfcast.api._units import parse_seconds
from perfcast.cli import app
from perfcast.errors import InputError
from perfcast.suite import load_scenario

runner = CliRunner()
SCENARIOS = api.__file__.replace("api/__init__.py", "suite/data/scenarios")


@pytest.mark.parametrize("text, seconds", [
    ("500ms", 0.5), ("0.5s", 0.5), ("2s", 2.0), ("0.5", 0.5), (0.05, 0.05), (1, 1.0),
    ("800us", 0.0008), (" 50 ms ", 0.05),
])
def test_durations_in_their_units(text, seconds):
    assert parse_seconds(text, "ttft_slo", 100.0) == pytest.approx(seconds)


@pytest.mark.parametrize("text, problem", [
    ("500", "looks like milliseconds"), (500, "looks like milliseconds"),
    ("fast", "not a duration"), ("0ms", "must be > 0"), ("-1s", "must be > 0"),
    ("5 minutes", "not a duration"), (True, "not a duration"), ("inf", "not a duration"),
])
def test_bad_durations_are_refused(text, problem):
    with pytest.raises(InputError) as err:
        parse_seconds(text, "ttft_slo", 100.0)
    assert err.value.field == "ttft_slo" and problem in err.value.problem


def test_serve_slos_in_milliseconds():
    base = ["serve", "--qps", "2", "--num-requests", "8", "--json"]
    ms = runner.invoke(app, [*base, "--ttft-slo", "500ms", "--tpot-slo", "50ms"])
    s = runner.invoke(app, [*base, "--ttft-slo", "0.5", "--tpot-slo", "0.05s"])
    assert ms.exit_code == 0 and s.exit_code == 0, ms.output + s.output
    assert ms.stdout == s.stdout and "goodput_req_s" in ms.stdout


def test_serve_bare_milliseconds_are_refused_not_read_as_seconds():
    res = runner.invoke(app, ["serve", "--qps", "2", "--num-requests", "8", "--ttft-slo",
                              "500", "--tpot-slo", "50"])
    assert res.exit_code == 2, res.output
    assert "ttft_slo: '500' looks like milliseconds" in res.output
    assert "write 500ms" in " ".join(res.output.split())


def test_capacity_slos_in_milliseconds():
    request = api.CapacityRequest.from_options(ttft_p99_slo="800ms", tpot_p99_slo="40ms")
    assert (request.target.ttft_p99_slo, request.target.tpot_p99_slo) == (0.8, 0.04)
    res = runner.invoke(app, ["capacity", "--tpot-p99-slo", "50"])
    assert res.exit_code == 2 and "tpot_p99_slo: '50' looks like milliseconds" in res.output


def test_capacity_cli_defaults_are_the_requests():
    assert api.CapacityRequest.from_options(ttft_p99_slo="1.0", tpot_p99_slo="0.05") == (
        api.CapacityRequest())


@pytest.mark.parametrize("name", ["39-x15.yaml", "24-i5_4.yaml"])
def test_scenario_slos_given_as_numbers_still_load(name):
    scenario = load_scenario(f"{SCENARIOS}/{name}")
    for options in scenario.runs().values():
        api.request_from_options(scenario.command, options)


def test_a_scenario_slo_of_1_is_one_second():
    request = api.CapacityRequest.from_options(ttft_p99_slo=1, tpot_p99_slo=0.05)
    assert request.target.slo().ttft_p99_s == 1.0
