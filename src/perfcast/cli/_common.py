"""CLI plumbing: the one error boundary (bad input: one clear line and exit code 2; anything
unexpected: one line and exit code 1, the traceback only with --debug)."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Annotated, Any

import click
import typer
from pydantic import ValidationError

from perfcast.api import Result
from perfcast.compose import HOST_PROFILES
from perfcast.errors import InputError, from_validation_error

__all__ = ["CalibrationOption", "HostOption", "JsonOption", "KernelModelOption", "emit_json",
           "cli_options", "debug_enabled", "emit", "fail", "guarded", "set_debug",
           "to_input_error"]

_DEBUG = {"on": False}  # set once per invocation by the global --debug flag

# Options several forecasting commands share, declared once.
KernelModelOption = Annotated[str, typer.Option(
    "--kernel-model", help="calibrated (fitted on measurements) or roofline.")]
CalibrationOption = Annotated[str | None, typer.Option(
    help="Extra calibration JSON from `perfcast calibrate`.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
HostOption = Annotated[str, typer.Option(
    help=f"Per-step host overhead of the serving engine: {', '.join(HOST_PROFILES)}.")]


def to_input_error(exc: ValidationError, prefix: str = "") -> InputError:
    return from_validation_error(exc, prefix=prefix, default=exc.title)


def fail(exc: InputError) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(code=2)


def set_debug(on: bool) -> None:
    """--debug: let unexpected exceptions (and their tracebacks) through the boundary."""
    _DEBUG["on"] = bool(on)


def debug_enabled() -> bool:
    return _DEBUG["on"]


def internal_error(exc: BaseException) -> None:
    """An exception perfcast did not expect: one line naming it, exit code 1."""
    what = type(exc).__name__
    detail = str(exc).splitlines()[0] if str(exc) else ""
    typer.echo(f"error: internal error ({what}{': ' + detail[:200] if detail else ''}): "
               "run with --debug for the traceback", err=True)
    raise typer.Exit(code=1)


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The one error boundary around a command: an InputError or spec validation error
    becomes one line + exit 2; any other exception one line + exit 1, unless --debug (then
    it propagates with its traceback). Exits, Ctrl-C and typer's own errors pass through."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            fail(exc)
        except ValidationError as exc:
            fail(to_input_error(exc))
        except (typer.Exit, typer.Abort, click.exceptions.ClickException, KeyboardInterrupt,
                SystemExit):
            raise
        except Exception as exc:
            if debug_enabled():
                raise
            internal_error(exc)

    return wrapper


def cli_options(values: dict[str, Any]) -> dict[str, Any]:
    """A command function's parameters (its `locals()`) as request options: everything but
    the output switch `--json`."""
    return {k: v for k, v in values.items() if k != "json_out"}


def emit(result: Result, json_out: bool, printer: Callable[[Any], None]) -> None:
    """Print a result: its payload as JSON, or the command's human tables."""
    if json_out:
        emit_json(result.payload())
    else:
        printer(result)


def emit_json(payload: dict) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, sort_keys=False) + "\n")
