"""The contract between the faces and `perfcast.api`, for every registered command:

- the CLI's flags are the request's options, with the same defaults;
- `run(request).payload()` is what `perfcast <command> ... --json` prints;
- the same question asked with defaults through Python and through the CLI gives one number;
- no face reaches the models around the API (no stdout capture, nothing imports the CLI).
"""

import ast
import importlib
import inspect
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import perfcast.api as api
from perfcast.cli import app
from perfcast.cli._common import OUTPUT_SWITCHES
from perfcast.cli._lazy import COMMANDS

SRC = Path(api.__file__).resolve().parents[1]
FORECAST_COMMANDS = ("accel", "capacity", "collective", "cpu", "diffusion", "infer", "rag",
                     "serve", "step", "train")

# The smallest question per command: every other option at its default.
EXAMPLES = {
    "infer": {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb"},
    "step": {"model": "gpt2"},
    "train": {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb", "num_gpus": 8, "zero": 3},
    "serve": {"num_requests": 20, "qps": 2.0},
    "collective": {"op": "allreduce", "num_gpus": 8, "bytes": "64MB", "gpu": "h100-sxm"},
    "accel": {"arch": "eyeriss-like", "model": "resnet50", "layer": "conv1"},
    "diffusion": {"gpu": "a100-sxm4-80gb", "steps": 2},
    "rag": {"gpu": "h100-sxm", "output_tokens": 8},
}


def _cli_function(name: str):
    """The function behind `perfcast <name>`, from the CLI's one command table."""
    for entry in COMMANDS:
        if entry.name == name:
            module = importlib.import_module(f"perfcast.cli.{entry.module}")
            return inspect.unwrap(getattr(module, entry.attr))
    raise LookupError(name)


def _argv(command: str, options: dict) -> list[str]:
    argv = [command, "--json"]
    for key, value in options.items():
        flag = f"--{key.replace('_', '-')}"
        if value is True:
            argv.append(flag)
        else:
            argv += [flag, str(value)]
    return argv


def test_every_forecasting_command_is_registered():
    assert set(FORECAST_COMMANDS) <= set(api.COMMANDS)


@pytest.mark.parametrize("command", sorted(api.COMMANDS))
def test_cli_flags_are_the_request_options_with_the_same_defaults(command):
    request = api.command_for(command).request
    fn = _cli_function(command)
    params = {name: p for name, p in inspect.signature(fn).parameters.items()
              if name not in OUTPUT_SWITCHES}
    assert set(params) == set(request.option_paths())
    defaults = request.option_defaults()
    for name, param in params.items():
        if param.default is inspect.Parameter.empty:
            assert name not in defaults, f"{command} --{name}: required on the CLI only"
        else:
            assert defaults[name] == param.default, f"{command} --{name}"


@pytest.mark.parametrize("command", sorted(api.COMMANDS))
def test_request_group_defaults_are_their_fields_defaults(command):
    """Omitting a whole group means the same as omitting each of its options."""
    request = api.command_for(command).request
    required = set(request.option_paths()) - set(request.option_defaults())
    if required:
        pytest.skip(f"{command} has required options {sorted(required)}")
    assert request() == request.from_options({})


@pytest.mark.parametrize("command", sorted(EXAMPLES))
def test_payload_is_what_the_cli_prints(command):
    """The same question, with defaults, through the CLI and through Python."""
    result = CliRunner().invoke(app, _argv(command, EXAMPLES[command]))
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    payload = api.run(api.request_from_options(command, EXAMPLES[command])).payload()
    assert json.loads(json.dumps(payload)) == printed


def test_no_face_captures_stdout_or_imports_the_cli():
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        assert not re.search(r"redirect_stdout|contextlib\.redirect", text), path
        if "cli" not in path.relative_to(SRC).parts:
            assert not re.search(r"^\s*(from|import) perfcast\.cli", text, re.M), path


@pytest.mark.parametrize("path", sorted((SRC / "cli").glob("*.py")), ids=lambda p: p.name)
def test_cli_functions_are_thin(path):
    """A command function builds a request, runs it and prints: its body (after the
    signature and docstring) is ~40 lines at most, and so is every helper beside it."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef):
            body = node.body[1:] if ast.get_docstring(node) else node.body
            if body:
                length = body[-1].end_lineno - body[0].lineno + 1
                assert length <= 40, f"{path.name}:{node.name} has {length} lines"
