"""The `perfcast` command line."""

from __future__ import annotations

from typing import Annotated

import typer

from perfcast import __version__
from perfcast.cli import _common
from perfcast.cli._accel import accel
from perfcast.cli._calibrate import calibrate
from perfcast.cli._catalog_cmds import hardware_app, models
from perfcast.cli._collective import collective
from perfcast.cli._console import HelpGroup
from perfcast.cli._cpu import cpu
from perfcast.cli._diffusion import diffusion
from perfcast.cli._infer import infer
from perfcast.cli._measure import measure
from perfcast.cli._plot import plot_app
from perfcast.cli._rag import rag
from perfcast.cli._serve import serve
from perfcast.cli._step import step
from perfcast.cli._suite import run, suite
from perfcast.cli._sweep import capacity, query, sweep
from perfcast.cli._train import train
from perfcast.cli._ui import ui
from perfcast.cli._validate import validate_app

__all__ = ["app", "main"]

app = typer.Typer(
    name="perfcast", no_args_is_help=True, add_completion=False, cls=HelpGroup,
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
    _common.set_debug(debug)  # every invocation sets it: one --debug run must not leak


app.command("suite")(suite)
app.command("run")(run)
app.add_typer(hardware_app, name="hardware")
app.command("models")(models)
app.command("infer")(infer)
app.command("step")(step)
app.command("train")(train)
app.command("serve")(serve)
app.command("measure")(measure)
app.command("calibrate")(calibrate)
app.command("collective")(collective)
app.command("accel")(accel)
app.command("cpu")(cpu)
app.command("diffusion")(diffusion)
app.command("rag")(rag)
app.add_typer(validate_app, name="validate")
app.add_typer(plot_app, name="plot")
app.command("ui")(ui)
app.command("sweep")(sweep)
app.command("query")(query)
app.command("capacity")(capacity)


def main() -> None:
    app()
