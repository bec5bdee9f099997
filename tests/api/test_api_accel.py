"""`perfcast.api` for `accel`: the payload is what `perfcast accel --json` prints, the
request's defaults are the CLI's, and `--plot` is written by the run, never over a file."""

import json

import pytest
from typer.testing import CliRunner

from perfcast.api import AccelModelResult, AccelRequest, run
from perfcast.cli import app
from perfcast.errors import InputError


def _cli(*args: str) -> dict:
    res = CliRunner().invoke(app, ["accel", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_payload_is_what_the_cli_prints():
    request = AccelRequest.from_options(model="mobilenet", layer="block2.dw", objective="energy",
                                        dataflow="weight-stationary", seed=3)
    printed = _cli("--model", "mobilenet", "--layer", "block2.dw", "--objective", "energy",
                   "--dataflow", "weight-stationary", "--seed", "3")
    assert json.loads(json.dumps(run(request).payload())) == printed


def test_defaults_give_the_cli_number():
    """One layer of the default model on the default arch, mapped for EDP both ways."""
    result = run(AccelRequest(workload={"layer": "conv1"}))
    assert isinstance(result, AccelModelResult)
    printed = _cli("--layer", "conv1")
    assert result.totals["cycles"] == printed["cycles"]
    assert result.totals["energy_j"] == printed["energy_j"]
    assert printed["arch"] == "eyeriss-like" and printed["objective"] == "edp"


def test_energy_by_level_sums_to_the_energy():
    result = run(AccelRequest(workload={"layer": "conv1"}))
    layer = result.layers[0]
    assert sum(result.energy_by_level(layer).values()) == pytest.approx(layer.energy_j)
    assert sum(result.energy_by_level().values()) == pytest.approx(result.totals["energy_j"])


def test_plot_is_written_and_never_overwritten(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "levels.png"
    request = AccelRequest.from_options(layer="conv1", plot=str(path))
    run(request)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(InputError) as err:
        run(request)
    assert err.value.field == "plot" and "never overwrites" in str(err.value)


@pytest.mark.parametrize("options, field", [({"arch": "eyeriss-lik"}, "arch"),
                                            ({"model": "resnet-50"}, "model"),
                                            ({"layer": "conv_1"}, "layer")])
def test_unknown_names_are_input_errors(options, field):
    with pytest.raises(InputError) as err:
        run(AccelRequest.from_options(options))
    assert err.value.field == field and "did you mean" in str(err.value)
