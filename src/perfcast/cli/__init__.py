"""The `perfcast` command line."""

from __future__ import annotations

import typer

from perfcast.cli._catalog_cmds import hardware_app, models
from perfcast.cli._infer import infer

__all__ = ["app", "main"]

app = typer.Typer(
    name="perfcast", no_args_is_help=True, add_completion=False,
    help="Forecast ML workload performance on hardware you do not own.",
)
app.add_typer(hardware_app, name="hardware")
app.command("models")(models)
app.command("infer")(infer)


def main() -> None:
    app()
