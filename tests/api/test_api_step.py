"""`perfcast.api` for `step`: the request's payload is what `perfcast step --json` prints, the
defaults agree, and `validate models` forecasts through the same request."""

import json

import pytest
from typer.testing import CliRunner

from perfcast.api import StepEngine, StepPlan, StepRequest, StepWorkload, run
from perfcast.cli import app
from perfcast.errors import InputError
from perfcast.validate import forecast_model_label, load_model_labels

runner = CliRunner()


def _cli(*args: str) -> dict:
    res = runner.invoke(app, ["step", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _payload(request: StepRequest) -> dict:
    return json.loads(json.dumps(run(request).payload()))


@pytest.mark.parametrize("options", [
    {"model": "gpt2", "mode": "training", "dp": 2, "batch": 4},
    {"model": "gpt2", "mode": "training", "pp": 2, "optimizer": "adam", "dtype": "bf16"},
    {"model": "gpt2", "tp": 2, "fused": True, "kernel_model": "roofline", "seq_len": 128},
])
def test_payload_is_what_the_cli_prints(options):
    argv = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    assert _payload(StepRequest.from_options(options)) == _cli(*argv)


def test_defaults_give_the_cli_number():
    result = run(StepRequest(model="gpt2"))
    assert result.time_s == _cli("--model", "gpt2")["time_s"]
    assert result.inputs["gpu"] == "a100-sxm4-80gb"  # the default GPU
    assert result.inputs["dtype"] == "fp32" and result.inputs["execution"] == "eager"


def test_nested_groups_equal_flat_options():
    nested = StepRequest(model="gpt2", hardware="v100-sxm2-32gb", plan=StepPlan(dp=2),
                         workload=StepWorkload(batch=4, mode="training"),
                         engine=StepEngine(recompute=True))
    flat = StepRequest.from_options(model="gpt2", gpu="v100-sxm2-32gb", dp=2, batch=4,
                                    mode="training", recompute=True)
    assert nested == flat
    result = run(nested)
    assert result.parallel is not None and result.time_s > result.step.time_s
    assert result.payload()["breakdown"]["exposed_parallel_comm_s"] == result.exposed_comm_s


def test_trace_is_written_once(tmp_path):
    trace = tmp_path / "step.json"
    result = run(StepRequest(model="gpt2", outputs={"trace": trace}))
    assert result.payload()["trace"] == str(trace)
    assert json.loads(trace.read_text())["traceEvents"]
    with pytest.raises(InputError, match="never overwrites"):
        run(StepRequest(model="gpt2", outputs={"trace": trace}))


@pytest.mark.parametrize("options, field", [
    ({"mode": "backward"}, "mode"), ({"dp": 3, "batch": 4}, "batch"),
    ({"pp": 2, "tp": 2}, "pp"), ({"num_gpus": 3, "tp": 2}, "num_gpus")])
def test_checks_name_their_option(options, field):
    with pytest.raises(InputError) as err:
        run(StepRequest.from_options(model="gpt2", **options))
    assert err.value.field == field


@pytest.mark.parametrize("variant", ["dp4", "pp4_1", "tp4", "fusion"])
def test_validate_models_forecasts_through_perfcast_step(variant):
    """A label's forecast is `perfcast step` with the label's flags, number for number."""
    labels = load_model_labels()
    label = labels[labels["variant"] == variant].iloc[0]
    layout = {"dp4": ["--dp", "4"], "pp4_1": ["--pp", "4"], "tp4": ["--tp", "4"],
              "fusion": ["--fused"]}[variant]
    # the labels ran PyTorch 1.x eager: the legacy stack, fusion and launch mode pinned
    layout += ["--stack", "hf-transformers-legacy", "--execution", "eager",
               *(["--no-fused"] if variant != "fusion" else [])]
    cli = _cli("--model", label["model"], "--gpu", label["device"], "--batch",
               str(label["batch"]), "--seq-len", str(label["seq_len"]), "--mode", label["mode"],
               *layout)
    result = forecast_model_label(label)
    assert json.loads(json.dumps(result.payload())) == cli
    assert forecast_model_label(label, "roofline").time_s == _cli(
        "--model", label["model"], "--gpu", label["device"], "--batch", str(label["batch"]),
        "--seq-len", str(label["seq_len"]), "--mode", label["mode"], "--kernel-model",
        "roofline", *layout)["time_s"]
