"""Issue 16, one input contract: every numeric option is checked against its range in the
request layer, and the error names the option and what is allowed (never a silent
replacement such as `--tp 0` running as tp=1)."""

import pytest
from typer.testing import CliRunner

import perfcast.api as api
from perfcast.cli import app
from perfcast.errors import InputError

runner = CliRunner()


def _refused(command: str, options: dict) -> InputError:
    """The InputError of building and resolving `command`'s request from `options`."""
    with pytest.raises(InputError) as err:
        api.resolve(api.request_from_options(command, options))
    return err.value


def test_infer_tp_0_is_refused_not_run_as_tp_1():
    res = runner.invoke(app, ["infer", "--model", "llama-2-7b", "--gpu", "h100-sxm",
                              "--tp", "0", "--json"])
    assert res.exit_code == 2, res.output
    assert "tp: must be >= 1, got 0" in res.output


def test_train_global_batch_0_is_refused_not_one_micro_batch_per_rank():
    res = runner.invoke(app, ["train", "--model", "llama-2-7b", "--gpu", "a100-sxm4-80gb",
                              "--num-gpus", "8", "--zero", "3", "--global-batch", "0", "--json"])
    assert res.exit_code == 2, res.output
    assert "global_batch: must be >= 1, got 0" in res.output


@pytest.mark.parametrize("command, options, field", [
    ("infer", {"batch": 0}, "batch"), ("infer", {"prompt_tokens": -1}, "prompt_tokens"),
    ("infer", {"images": -1}, "images"), ("infer", {"num_gpus": 0}, "num_gpus"),
    ("step", {"seq_len": 0}, "seq_len"), ("step", {"batch": -4}, "batch"),
    ("train", {"num_gpus": 0}, "num_gpus"), ("train", {"ep": 0}, "ep"),
    ("train", {"zero": 4}, "zero"), ("train", {"virtual_stages": 0}, "virtual_stages"),
    ("train", {"expert_skew": 0.5}, "expert_skew"), ("train", {"top": 0}, "top"),
    ("train", {"generation_tp": 0}, "generation_tp"),
    ("serve", {"tp": 0}, "tp"), ("serve", {"cv": -1.0}, "cv"),
    ("serve", {"prompt_groups": 0}, "prompt_groups"), ("serve", {"think_s": -1.0}, "think_s"),
    ("serve", {"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
    ("capacity", {"qps": 0}, "qps"), ("capacity", {"qps_step": -1}, "qps_step"),
    ("capacity", {"workers": 0}, "workers"), ("capacity", {"seed": -1}, "seed"),
    ("collective", {"nodes": 0}, "nodes"), ("accel", {"batch_size": 0}, "batch_size"),
    ("accel", {"seed": -1}, "seed"), ("rag", {"tp": 0}, "tp"), ("rag", {"dim": 0}, "dim"),
    ("rag", {"query_tokens": 0}, "query_tokens"), ("diffusion", {"steps": 0}, "steps"),
    ("diffusion", {"height": 0}, "height"), ("cpu", {"seed": -1}, "seed"),
    ("measure", {"repeats": 0}, "repeats"),
])
def test_a_value_out_of_range_names_the_option_and_the_range(command, options, field):
    base = {"collective": {"op": "allreduce", "num_gpus": 8, "bytes": "1MB", "gpu": "h100-sxm"},
            "measure": {"out": "x.csv"}}.get(command, {})
    err = _refused(command, {**base, **options})
    assert err.field == field
    assert "must be" in err.problem and ("got" in err.problem or "got" in str(err))


def test_the_message_says_what_is_allowed():
    err = _refused("infer", {"tp": 0})
    assert (err.problem, err.allowed) == ("must be >= 1, got 0", ">= 1")


@pytest.mark.parametrize("argv, message", [
    (["collective", "--op", "allreduce", "--num-gpus", "8", "--gpu", "h100-sxm", "--bytes",
      "1e30"], "over the 1 TB bound"),
    (["serve", "--qps", "1", "--num-requests", "2000000000"],
     "num_requests: must be <= 10,000,000"),
    (["infer", "--model", "llama-2-7b", "--gpu", "h100-sxm", "--prompt-tokens", "100000000"],
     "prompt_tokens: must be <= 10,000,000"),
    (["infer", "--model", "llama-2-7b", "--gpu", "h100-sxm", "--batch", "100000000"],
     "batch: must be <= 1,000,000"),
    (["serve", "--qps", "1", "--lengths", "uniform", "--prompt-tokens", "1,100000000",
      "--output-tokens", "1,10"], "over the 10,000,000-token bound"),
    (["capacity", "--num-requests", "100000000"], "num_requests: must be <= 10,000,000"),
])
def test_sizes_a_typo_blows_up_are_bounded_with_the_bound_in_the_message(argv, message):
    res = runner.invoke(app, argv)
    assert res.exit_code == 2, res.output
    assert message in " ".join(res.output.split())


def test_serve_fixed_lengths_over_the_simulated_maximum_name_prompt_tokens():
    """Not `max_tokens`, which is no serve option."""
    err = _refused("serve", {"qps": 1.0, "prompt_tokens": "5000"})
    assert err.field == "prompt_tokens" and "4096" in err.problem


def test_a_spec_validation_error_in_resolve_is_an_input_error_naming_the_option():
    err = _refused("train", {"model": "llama-2-7b", "gpu": "h100-sxm", "num_gpus": 8,
                             "sp": True})
    assert err.field == "sp"


def test_valid_edges_still_build():
    api.resolve(api.request_from_options("infer", {"model": "llama-2-7b", "gpu": "h100-sxm",
                                                    "output_tokens": 0, "images": 0}))
    api.resolve(api.request_from_options("train", {"model": "llama-2-7b", "gpu": "h100-sxm",
                                                    "num_gpus": 8, "zero": 3,
                                                    "global_batch": 8}))
