"""`perfcast.api` for `capacity`: the request's payload is what `perfcast capacity --json`
prints, and every candidate's latencies are those of a `ServeRequest` run at its operating
point."""

import json

import pytest
from typer.testing import CliRunner

from perfcast.api import CapacityRequest, ServeRequest, run
from perfcast.api._capacity import serve_payload
from perfcast.cli import app
from perfcast.errors import InputError

runner = CliRunner()
OPTIONS = {"model": "llama-2-7b", "gpu": "h100-sxm", "tp": "1,2", "qps": 2.0,
           "num_requests": 20, "workers": 1}


def test_payload_is_what_the_cli_prints():
    argv = ["capacity", "--json"]
    for key, value in OPTIONS.items():
        argv += ["--" + key.replace("_", "-"), str(value)]
    res = runner.invoke(app, argv)
    assert res.exit_code == 0, res.output
    result = run(CapacityRequest.from_options(OPTIONS))
    assert json.loads(json.dumps(result.payload())) == json.loads(res.stdout)
    assert list(result.candidates["tp"]) == [1, 2] and result.chosen["tp"] == 1


def test_candidates_are_serve_requests_at_their_operating_point():
    result = run(CapacityRequest.from_options(OPTIONS, set=["scheduler=vllm-v1"]))
    for row in result.search["candidates"]:
        serve = run(ServeRequest.from_options(
            model="llama-2-7b", gpu=row["gpu"], tp=row["tp"], qps=row["qps_per_replica"],
            num_requests=20, seed=0, scheduler="vllm-v1")).payload()
        assert (row["ttft_p99_s"], row["tpot_p99_s"]) == (serve["ttft_s"]["p99"],
                                                          serve["tpot_s"]["p99"])


def test_a_probe_is_the_serve_payload():
    point = {"model": "llama-2-7b", "gpu": "h100-sxm", "tp": 1, "qps": 1.0, "num_requests": 8}
    assert serve_payload(point) == run(ServeRequest.from_options(point)).payload()


@pytest.mark.parametrize("options, field", [
    ({"set": ["tp=2"]}, "set.tp"), ({"set": ["qpss=2"]}, "set.qpss"),
    ({"num_requests": 0}, "num_requests"), ({"tp": "two"}, "tp"),
    ({"ttft_p99_slo": 0}, "ttft_p99_slo"), ({"gpu": "h200-sxm"}, "gpu"),
])
def test_checks_name_their_option(options, field):
    with pytest.raises(InputError) as err:
        run(CapacityRequest.from_options({**OPTIONS, **options}))
    assert err.value.field == field
