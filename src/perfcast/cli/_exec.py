"""Run a CLI command from a mapping of its options and return its `--json` payload.

The scenario suite, sweeps and the UI all go through here, so a scenario file and a command
line share one vocabulary (the command's option names) and one implementation: a number the
suite reports is the number `perfcast <command> ... --json` prints.
"""

from __future__ import annotations

import inspect
import io
import json
import typing
from collections.abc import Callable, Mapping
from contextlib import redirect_stdout
from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError

from perfcast.errors import InputError, close_matches

__all__ = ["COMMANDS", "command_options", "run_command"]

# Commands whose `--json` output is one payload; name -> "module:function".
COMMANDS: dict[str, str] = {
    "infer": "perfcast.cli._infer:infer",
    "step": "perfcast.cli._step:step",
    "train": "perfcast.cli._train:train",
    "serve": "perfcast.cli._serve:serve",
    "collective": "perfcast.cli._collective:collective",
    "accel": "perfcast.cli._accel:accel",
    "diffusion": "perfcast.cli._diffusion:diffusion",
    "rag": "perfcast.cli._rag:rag",
    "cpu": "perfcast.cli._cpu:cpu",
    "capacity": "perfcast.cli._sweep:capacity",
}

# Options a scenario may not set: output plumbing the executor owns.
_RESERVED = {"json_out"}


@cache
def _function(command: str) -> Callable[..., Any]:
    if command not in COMMANDS:
        hint = close_matches(command, COMMANDS)
        problem = f"unknown command {command!r}" + (f"; did you mean {hint[0]}?" if hint else "")
        raise InputError("command", problem, sorted(COMMANDS))
    module_name, attr = COMMANDS[command].split(":")
    module = __import__(module_name, fromlist=[attr])
    fn = getattr(module, attr)
    return getattr(fn, "__wrapped__", fn)  # past `guarded`: InputError propagates


def _flag_name(param: str, annotated: Any) -> str:
    """The option's long flag as a key (`--kernel-model` -> kernel_model), else the param."""
    for meta in getattr(annotated, "__metadata__", ()):
        # inside Annotated, typer takes Option's first positional (`default`) as a flag
        decls = [getattr(meta, "default", None), *(getattr(meta, "param_decls", None) or ())]
        for decl in decls:
            if isinstance(decl, str) and decl.startswith("--"):
                return decl[2:].split("/")[0].replace("-", "_")
    return param


@cache
def _options(command: str) -> dict[str, tuple[str, Any]]:
    """Option key -> (the function's parameter name, its type without typer metadata)."""
    fn = _function(command)
    hints = typing.get_type_hints(fn, include_extras=True)
    options = {}
    for param in inspect.signature(fn).parameters:
        if param in _RESERVED:
            continue
        annotated = hints[param]
        bare = typing.get_args(annotated)[0] if hasattr(annotated, "__metadata__") else annotated
        options[_flag_name(param, annotated)] = (param, bare)
    return options


def _required(command: str, param: str) -> bool:
    """A parameter with no default: the command line makes it a required option."""
    default = inspect.signature(_function(command)).parameters[param].default
    return default is inspect.Parameter.empty


def command_options(command: str) -> dict[str, Any]:
    """Option key (the long flag, dashes as underscores) -> its type, for one command."""
    return {key: bare for key, (_, bare) in _options(command).items()}


@cache
def _adapter(command: str, option: str) -> TypeAdapter:
    return TypeAdapter(command_options(command)[option])


def _coerce(command: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Validate option names and convert YAML values to each option's declared type."""
    known = _options(command)
    given = {name.replace("-", "_") for name in options}
    for key, (param, _) in known.items():
        if _required(command, param) and key not in given:
            raise InputError(key, f"`{command}` needs this option", sorted(
                k for k, (p, _) in known.items() if _required(command, p)))
    kwargs: dict[str, Any] = {}
    for name, value in options.items():
        key = name.replace("-", "_")
        if key not in known:
            hint = close_matches(key, known)
            problem = f"{command} has no option {name!r}" + (
                f"; did you mean {hint[0]}?" if hint else "")
            raise InputError(name, problem, sorted(known))
        try:
            kwargs[known[key][0]] = _adapter(command, key).validate_python(value)
        except ValidationError as exc:
            msg = exc.errors()[0]["msg"]
            raise InputError(name, f"{value!r} is not valid for `{command}`: {msg}") from None
    return kwargs


def run_command(command: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """`perfcast <command> --<option> <value> ... --json`, in process: its JSON payload.

    Bad option names or values raise InputError naming the option; errors the command
    itself finds (unknown model, plan that does not fit) propagate as InputError too.
    """
    kwargs = _coerce(command, options)
    fn = _function(command)
    if "json_out" in inspect.signature(fn).parameters:
        kwargs["json_out"] = True
    buffer = io.StringIO()
    try:
        with redirect_stdout(buffer):
            fn(**kwargs)
    except ValidationError as exc:
        from perfcast.errors import from_validation_error
        raise from_validation_error(exc, default=command) from None
    text = buffer.getvalue()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise InputError("command", f"`{command}` printed no JSON payload: {text[:200]!r}"
                         ) from None
