"""`perfcast.api` for `train`: each of its four questions (an LLM iteration, the plan search,
an RLHF step, a ResNet's DDP iteration) gives the payload `perfcast train --json` prints, the
defaults agree, and options one question does not take are refused by name."""

import json

import pytest
from typer.testing import CliRunner

from perfcast.api import (
    CNNTrainResult,
    PlanSearch,
    ResolvedCNNTrain,
    ResolvedRLHF,
    ResolvedTrain,
    ResolvedTrainSweep,
    RLHFResult,
    TrainPlan,
    TrainRequest,
    TrainResult,
    TrainSweepResult,
    TrainWorkload,
    resolve,
    run,
)
from perfcast.cli import app
from perfcast.errors import InputError

runner = CliRunner()
GPT2 = {"model": "gpt2", "gpu": "a100-sxm4-80gb"}


def _argv(options: dict) -> list[str]:
    argv = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    return argv


def _cli(options: dict) -> dict:
    res = runner.invoke(app, ["train", *_argv(options), "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize("options, result_type", [
    ({**GPT2, "num_gpus": 4, "pp": 2, "global_batch": 8, "seq_len": 512,
      "schedule": "interleaved-1f1b", "virtual_stages": 2}, TrainResult),
    ({**GPT2, "num_gpus": 2, "tp": 2, "sp": True, "zero": 1, "recompute": "selective",
      "dtype": "fp16", "kernel_model": "roofline", "seq_len": 256}, TrainResult),
    ({"model": "llama-2-7b", "gpu": "h100-sxm", "num_gpus": 8, "zero": 3,
      "stack": "llm-foundry", "seq_len": 1024}, TrainResult),
    ({**GPT2, "num_gpus": 4, "sweep": True, "top": 2, "seq_len": 256}, TrainSweepResult),
    ({**GPT2, "num_gpus": 2, "rlhf": True, "seq_len": 128, "response_tokens": 32,
      "global_batch": 4}, RLHFResult),
    ({"model": "resnet18", "gpu": "a100-sxm4-80gb", "num_gpus": 2, "micro_batch": 8},
     CNNTrainResult),
], ids=["pipeline", "tp-sp", "stack", "sweep", "rlhf", "cnn"])
def test_payload_is_what_the_cli_prints(options, result_type):
    result = run(TrainRequest.from_options(options))
    assert isinstance(result, result_type)
    assert json.loads(json.dumps(result.payload())) == _cli(options)


def test_defaults_give_the_cli_number():
    result = run(TrainRequest(model="gpt2", hardware="a100-sxm4-80gb"))
    printed = _cli(GPT2)
    assert result.forecast.iteration_time_s == printed["iteration_time_s"]
    assert result.inputs["dtype"] == "bf16" and result.inputs["seq_len"] == 2048
    assert result.inputs["kernel_model"]["name"] == "calibrated"
    assert result.inputs["kernel_model"]["stack"] == "megatron-core"  # the default stack


def test_nested_groups_equal_flat_options():
    nested = TrainRequest(model="gpt2", hardware="a100-sxm4-80gb",
                          plan=TrainPlan(num_gpus=4, pp=2),
                          workload=TrainWorkload(global_batch=8, seq_len=512))
    flat = TrainRequest.from_options(**GPT2, num_gpus=4, pp=2, global_batch=8, seq_len=512)
    assert nested == flat
    assert TrainRequest.from_options(**GPT2, sweep=True).search == PlanSearch(sweep=True)


def test_resolve_names_the_question():
    assert isinstance(resolve(TrainRequest.from_options(GPT2)), ResolvedTrain)
    assert isinstance(resolve(TrainRequest.from_options(**GPT2, sweep=True)),
                      ResolvedTrainSweep)
    assert isinstance(resolve(TrainRequest.from_options(**GPT2, rlhf=True)), ResolvedRLHF)
    cnn = resolve(TrainRequest.from_options(model="resnet50", gpu="a100-sxm4-80gb"))
    assert isinstance(cnn, ResolvedCNNTrain) and cnn.dtype == "fp32"
    iteration = resolve(TrainRequest.from_options(**GPT2, num_gpus=8, tp=2))
    assert (iteration.job.plan.tp, iteration.job.plan.dp, iteration.job.global_batch) == (2, 4, 4)


@pytest.mark.parametrize("options, field", [
    ({"model": "resnet50", "tp": 2}, "tp"), ({"model": "resnet50", "zero": 1}, "zero"),
    ({"model": "resnet50", "sweep": True}, "sweep"),
    ({"model": "resnet50", "allow_oom": True}, "allow_oom"),
    ({"model": "gpt2", "recompute": "half"}, "recompute"),
    ({"model": "gpt2", "schedule": "zb"}, "schedule"),
    ({"model": "gpt2", "num_gpus": 12, "tp": 8}, "num_gpus"),
    ({"model": "gpt2", "stack": "llm-foundry", "rlhf": True}, "stack"),
    ({"model": "gpt2", "sweep": True, "trace_out": "t.json"}, "trace_out"),
    ({"model": "gpt2", "num_gpus": 8, "sweep": True, "rlhf": True}, "rlhf"),
])
def test_checks_name_their_option(options, field):
    with pytest.raises(InputError) as err:
        run(TrainRequest.from_options(gpu="a100-sxm4-80gb", **options))
    assert err.value.field == field


def test_a_plan_that_does_not_fit_is_refused_unless_allowed():
    options = {"model": "llama-2-70b", "gpu": "a100-sxm4-80gb", "num_gpus": 8,
               "seq_len": 1024}
    with pytest.raises(InputError) as err:
        run(TrainRequest.from_options(options))
    assert err.value.field == "memory"
    result = run(TrainRequest.from_options(options, allow_oom=True))
    assert not result.forecast.fits and result.payload()["fits"] is False


def test_trace_out_is_the_schedule_of_the_forecast_and_never_overwritten(tmp_path):
    path = tmp_path / "train.json"
    options = {**GPT2, "num_gpus": 2, "pp": 2, "global_batch": 4, "seq_len": 256}
    result = run(TrainRequest.from_options(options, trace_out=path))
    spans = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]
    end_s = max(e["ts"] + e["dur"] for e in spans) / 1e6
    assert end_s == pytest.approx(result.forecast.iteration_time_s, abs=1e-9)
    assert result.schedule().forecast is result.forecast
    with pytest.raises(InputError, match="never overwrites"):
        run(TrainRequest.from_options(options, trace_out=path))


def test_a_measured_network_prices_the_multi_node_collectives_and_is_named():
    """ZeRO-3 over two DGX A100 nodes: the network measured by a 2-node send/recv (29 us,
    7.8 GB/s a stream) makes the iteration slower than the preset's 8 x 25 GB/s adapters, and
    the inputs (and the table) name it; on one node the options are refused."""
    base = {"model": "llama-2-7b", "cluster": "dgx-a100", "num_gpus": 16, "zero": 3}
    spec = run(TrainRequest.from_options(base))
    measured = run(TrainRequest.from_options(base, sendrecv_latency_us=29.0,
                                             sendrecv_gbps=7.8))
    assert measured.forecast.iteration_time_s > 1.3 * spec.forecast.iteration_time_s
    assert "network" not in spec.inputs
    assert measured.inputs["network"]["stream_gbps"] == 7.8
    printed = runner.invoke(app, ["train", "--model", "llama-2-7b", "--cluster", "dgx-a100",
                                  "--num-gpus", "16", "--zero", "3", "--sendrecv-latency-us",
                                  "29", "--sendrecv-gbps", "7.8"])
    assert printed.exit_code == 0, printed.output
    assert "per-GPU stream 7.80 GB/s" in printed.stdout
    with pytest.raises(InputError) as err:
        run(TrainRequest.from_options({**base, "num_gpus": 8}, gpus_per_nic=2))
    assert err.value.field == "gpus_per_nic" and "never crossed" in str(err.value)
