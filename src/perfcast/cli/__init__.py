"""The `perfcast` command line."""

from __future__ import annotations

import typer

from perfcast.cli._accel import accel
from perfcast.cli._calibrate import calibrate
from perfcast.cli._catalog_cmds import hardware_app, models
from perfcast.cli._collective import collective
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
    name="perfcast", no_args_is_help=True, add_completion=False,
    help="Forecast ML workload performance on hardware you do not own.",
)
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
