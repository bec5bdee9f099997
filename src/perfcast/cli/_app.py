"""The `perfcast` typer app. Its commands are listed in `cli._lazy.COMMANDS` and imported
only when one runs, so `perfcast --help` and `--version` import no command (nor perfcast.api)."""

from __future__ import annotations

from typing import Annotated

import typer

from perfcast import __version__
from perfcast.cli import _debug
from perfcast.cli._lazy import LazyGroup

__all__ = ["app"]

app = typer.Typer(
    name="perfcast", no_args_is_help=True, add_completion=False, cls=LazyGroup,
    help="Forecast ML workload performance on hardware you do not own.",
    context_settings={"max_content_width": 100},
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"perfcast {__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_print_version,
        help="Print perfcast's version and exit.")] = False,
    debug: Annotated[bool, typer.Option(
        "--debug", help="Show the Python traceback of an unexpected error (for a bug report); "
        "goes before the command: perfcast --debug serve ...")] = False,
) -> None:
    """Forecast ML workload performance on hardware you do not own."""
    _debug.set_debug(debug)  # every invocation sets it: one --debug run must not leak
