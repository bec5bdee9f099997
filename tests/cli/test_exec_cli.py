"""The in-process executor behind the suite, sweeps and the UI prints what the CLI prints."""

import json

import pytest
from typer.testing import CliRunner

from perfcast.cli import app
from perfcast.cli._exec import command_options, run_command
from perfcast.errors import InputError

ARGS = {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb", "prompt_tokens": 256,
        "output_tokens": 32, "kernel_model": "roofline"}


def test_payload_equals_the_cli_json():
    argv = ["infer", "--json"] + [x for k, v in ARGS.items()
                                  for x in (f"--{k.replace('_', '-')}", str(v))]
    printed = json.loads(CliRunner().invoke(app, argv).stdout)
    assert run_command("infer", ARGS) == printed


def test_option_keys_are_the_long_flags():
    assert "kernel_model" in command_options("infer")
    assert "kernel_model_name" not in command_options("infer")
    assert "json_out" not in command_options("serve")
    assert run_command("infer", {**ARGS, "prompt-tokens": 256}) == run_command("infer", ARGS)


@pytest.mark.parametrize("options, field, text", [
    ({"modle": "llama-2-7b"}, "modle", "did you mean model"),
    ({"prompt_tokens": "many"}, "prompt_tokens", "valid integer"),
    ({"model": "llama-2-7bb", "gpu": "a100-sxm4-80gb"}, "model", "did you mean llama-2-7b"),
])
def test_bad_options_name_the_field(options, field, text):
    with pytest.raises(InputError) as err:
        run_command("infer", options)
    assert err.value.field == field and text in str(err.value)


def test_unknown_command_suggests():
    with pytest.raises(InputError, match="did you mean infer"):
        run_command("infr", {})


def test_a_missing_required_option_is_named():
    with pytest.raises(InputError) as err:
        run_command("collective", {"gpu": "h100-sxm", "num_gpus": 8})
    assert err.value.field == "op" and "needs this option" in str(err.value)
