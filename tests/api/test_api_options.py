"""Requests from flat options (scenario files, sweep points, UI forms, command lines): names
are the CLI's long flags, bad names and values are errors naming the option, and a request
dumps to data and loads back as the same request."""

import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from perfcast.api import (
    InferRequest,
    ServeRequest,
    dump_request,
    load_request,
    request_from_options,
    run,
    run_options,
)
from perfcast.cli import app
from perfcast.errors import InputError

ARGS = {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb", "prompt_tokens": 256,
        "output_tokens": 32, "kernel_model": "roofline"}


def test_payload_equals_the_cli_json():
    argv = ["infer", "--json"] + [x for k, v in ARGS.items()
                                  for x in (f"--{k.replace('_', '-')}", str(v))]
    printed = json.loads(CliRunner().invoke(app, argv).stdout)
    assert run_options("infer", ARGS).payload() == printed


def test_option_keys_are_the_long_flags():
    options = InferRequest.option_paths()
    assert "kernel_model" in options and "model_config" in options
    assert "kernel_model_name" not in options and "json_out" not in options
    dashed = request_from_options("infer", {**ARGS, "prompt-tokens": 256})
    assert dashed == request_from_options("infer", ARGS)


@pytest.mark.parametrize("options, field, text", [
    ({"modle": "llama-2-7b"}, "modle", "did you mean model"),
    ({"prompt_tokens": "many"}, "prompt_tokens", "valid integer"),
    ({"model": "llama-2-7bb", "gpu": "a100-sxm4-80gb"}, "model", "did you mean llama-2-7b"),
    ({"model": "llama-2-7b", "gpu": "a100-sxm4-80gb", "kernel_model": "magic"},
     "kernel_model", "unknown model"),
])
def test_bad_options_name_the_field(options, field, text):
    with pytest.raises(InputError) as err:
        run_options("infer", options)
    assert err.value.field == field and text in str(err.value)


def test_unknown_command_suggests():
    with pytest.raises(InputError, match="did you mean infer"):
        run_options("infr", {})


def test_a_missing_required_option_is_named():
    with pytest.raises(InputError) as err:
        run_options("collective", {"gpu": "h100-sxm", "num_gpus": 8})
    assert err.value.field == "op" and "needs this option" in str(err.value)


def test_a_request_is_not_a_mapping():
    with pytest.raises(InputError, match="expected a perfcast request"):
        run({"command": "infer"})


def test_groups_take_a_bare_name():
    """`model="llama-2-7b"` and `hardware="h100-sxm"` are the common case in a notebook."""
    short = InferRequest(model="llama-2-7b", hardware="h100-sxm")
    assert short == InferRequest.from_options(model="llama-2-7b", gpu="h100-sxm")


def test_requests_are_frozen_and_strict():
    request = InferRequest(model="llama-2-7b", hardware="h100-sxm")
    with pytest.raises(ValueError):
        request.workload.batch = 4  # frozen
    with pytest.raises(InputError, match="workload"):
        InferRequest.validated({"model": "llama-2-7b", "workload": {"batches": 4}})


@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from([None, 1, 2, 4]), batch=st.integers(1, 64),
       prompt=st.integers(1, 8192), dtype=st.sampled_from(["bf16", "fp16", "fp8"]),
       via_yaml=st.booleans())
def test_dump_and_load_round_trip(tp, batch, prompt, dtype, via_yaml):
    """A request survives JSON and YAML: a scenario, a sweep point and a UI form are the
    same object as the command line that made it."""
    request = InferRequest.from_options(model="llama-2-7b", gpu="h100-sxm", tp=tp,
                                        batch=batch, prompt_tokens=prompt, dtype=dtype)
    data = dump_request(request)
    text = yaml.safe_dump(data) if via_yaml else json.dumps(data)
    loaded = load_request(yaml.safe_load(text) if via_yaml else json.loads(text))
    assert loaded == request
    assert load_request({"command": "infer", **request.options()}) == request


def test_load_request_needs_a_command():
    with pytest.raises(InputError) as err:
        load_request({"model": "llama-2-7b"})
    assert err.value.field == "command"


@settings(max_examples=40, deadline=None)
@given(tp=st.sampled_from([1, 2, 4]), qps=st.sampled_from([1.0, 2.5]),
       scheduler=st.sampled_from(["vllm-v1", "sarathi"]),
       asked=st.lists(st.sampled_from(["tp", "qps", "scheduler", "seed", "replicas"]),
                      min_size=1, max_size=5))
def test_first_given_is_the_first_option_off_its_default(tp, qps, scheduler, asked):
    """first_given (which reads only the asked options against defaults built once per class)
    is its definition over the flat options and a fresh option_defaults()."""
    request = ServeRequest.from_options(model="llama-2-7b", gpu="h100-sxm", tp=tp, qps=qps,
                                        scheduler=scheduler)
    given, defaults = request.options(), ServeRequest.option_defaults()
    expected = next((o for o in asked if given[o] != defaults[o]), None)
    assert request.first_given(*asked) == expected
