"""CLI plumbing: the one error boundary (bad input: one clear line and exit code 2; anything
unexpected: one line and exit code 1, the traceback only with --debug)."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import sys
from collections.abc import Callable
from typing import Annotated, Any

import click
import typer
from pydantic import ValidationError

from perfcast.api import Request, run
from perfcast.cli._console import OUTPUT_FORMATS, tables_as
from perfcast.cli._debug import debug_enabled, set_debug
from perfcast.cli._progress import progress_bar
from perfcast.compose import HOST_PROFILES
from perfcast.errors import InputError, from_validation_error

__all__ = ["OUTPUT_SWITCHES", "CalibrationMismatchOption", "CalibrationOption", "FormatOption",
           "GpusPerNicOption", "HostOption", "NodesPerLeafOption", "OversubscriptionOption",
           "SendrecvGbpsOption", "SendrecvLatencyOption", "SharpOption",
           "HostSpeedOption", "JsonOption", "StackHostOption", "StackOption",
           "KernelModelOption", "answer", "cli_options", "debug_enabled", "emit", "fail",
           "guarded", "output_format", "set_debug", "to_input_error"]

# Options several forecasting commands share, declared once.
KernelModelOption = Annotated[str, typer.Option(
    "--kernel-model", help="calibrated (physical model), learned (trees over it) or "
    "roofline.")]
CalibrationOption = Annotated[str | None, typer.Option(
    help="Extra calibration JSON from `perfcast calibrate`.")]
CalibrationMismatchOption = Annotated[bool, typer.Option(
    "--force-calibration", help="Apply a --calibration of another device or stack.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (= --format json).")]
# The network between nodes (api NetworkOptions), for every command that spans nodes.
SendrecvLatencyOption = Annotated[float | None, typer.Option(
    help="The network as measured: 2-node send/recv (nccl-tests) latency, us.")]
SendrecvGbpsOption = Annotated[float | None, typer.Option(
    help="Its large-message rate, GB/s: each GPU's network stream.")]
GpusPerNicOption = Annotated[int | None, typer.Option(
    help="GPUs sharing one network adapter (default: the preset's).")]
SharpOption = Annotated[bool, typer.Option(
    help="The network reduces in its switches (InfiniBand SHARP, NCCL CollNet).")]
OversubscriptionOption = Annotated[float, typer.Option(
    help="Leaf-to-spine taper: a group over more than --nodes-per-leaf nodes gets the "
         "adapters' rate / this.")]
NodesPerLeafOption = Annotated[int | None, typer.Option(
    help="Nodes one leaf switch reaches (default: one non-blocking tier).")]
FormatOption = Annotated[str | None, typer.Option(
    "--format", help="table (the default), json, csv or md.")]
# Parameters of a command that choose how it prints, not what it computes: never options
# of its request.
OUTPUT_SWITCHES = ("json_out", "format_out")
BROKEN_PIPE_EXIT = 141  # the shell's code for a writer whose reader left (128 + SIGPIPE)
HostOption = Annotated[str, typer.Option(
    help=f"Per-step host overhead of the serving engine: {', '.join(HOST_PROFILES)}.")]
StackHostOption = Annotated[str | None, typer.Option(
    "--host", help=f"Engine host overhead per step: {', '.join(HOST_PROFILES)} (default: "
    "the stack's).")]
StackOption = Annotated[str | None, typer.Option(
    help="Software stack (`perfcast stacks`); default: the question's.")]
HostSpeedOption = Annotated[float, typer.Option(
    help="Host CPU speed vs the stack's reference (divides host costs).")]


def to_input_error(exc: ValidationError, prefix: str = "") -> InputError:
    return from_validation_error(exc, prefix=prefix, default=exc.title)


def fail(exc: InputError) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(code=2)


def internal_error(exc: BaseException) -> None:
    """An exception perfcast did not expect: one line naming it, exit code 1."""
    what = type(exc).__name__
    detail = str(exc).splitlines()[0] if str(exc) else ""
    typer.echo(f"error: internal error ({what}{': ' + detail[:200] if detail else ''}): "
               "run with --debug for the traceback", err=True)
    raise typer.Exit(code=1)


def reader_gone() -> None:
    """The reader of stdout left (`perfcast models | head -3`): stop quietly, as `cat` does,
    with the shell's code for SIGPIPE; stdout goes to /dev/null so the interpreter's last
    flush cannot raise again (the recipe of Python's `signal` docs, "Note on SIGPIPE")."""
    with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):  # a test runner
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    raise typer.Exit(code=BROKEN_PIPE_EXIT)


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
        except BrokenPipeError:
            reader_gone()
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
    the output switches (`--json`, `--format`)."""
    return {k: v for k, v in values.items() if k not in OUTPUT_SWITCHES}


def output_format(json_out: bool, format_out: str | None) -> str:
    """The one format `--json` and `--format` ask for (`--json` is `--format json`); checked
    before any work. Both given, naming different formats: refused."""
    if format_out is None:
        return "json" if json_out else "table"
    if format_out not in OUTPUT_FORMATS:
        raise InputError("format", f"unknown format {format_out!r}", OUTPUT_FORMATS)
    if json_out and format_out != "json":
        raise InputError("format", f"--json and --format {format_out} both given",
                         "one of them")
    return format_out


def answer(request_type: type[Request], values: dict[str, Any], show: Callable[[Any], None],
           progress: str | None = None) -> None:
    """The body of a command that asks `perfcast.api` one question: its parameters
    (`locals()`) as the request, the output format checked before any work, `api.run`, and
    the result printed in that format by `show(result)`. `progress` labels the bar that long
    work draws (None: none)."""
    request = request_type.from_options(cli_options(values))
    fmt = output_format(values["json_out"], values["format_out"])
    with progress_bar(progress or "", quiet=progress is None or fmt == "json") as bar:
        result = run(request, progress=bar)
    emit(fmt, result.payload, lambda: show(result))


def emit(fmt: str, payload: Callable[[], Any], show: Callable[[], None]) -> None:
    """Print a command's output in `fmt` (from `output_format`): `payload()` as JSON, or
    `show()`, which prints the command's tables, as Rich tables, CSV or Markdown."""
    if fmt == "json":
        _print_json(payload())
        return
    with tables_as(fmt):
        show()


def _print_json(payload: dict) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, sort_keys=False) + "\n")
