"""The suite-wide check of tests/conftest.py: a CLI run whose output is cut ('…'), shows a
traceback or a RuntimeWarning fails the test that made it."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner


def _app(text: str) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def say() -> None:
        typer.echo(text, err=True)

    return app


@pytest.mark.parametrize("text", ["llam…", "Traceback (most recent call last):",
                                  "x.py:3: RuntimeWarning: divide by zero"])
def test_a_cut_value_traceback_or_warning_fails_the_run(text):
    with pytest.raises(AssertionError, match="CLI output contains"):
        CliRunner().invoke(_app(text), [])


def test_clean_output_passes():
    assert CliRunner().invoke(_app("llama-2-7b"), []).exit_code == 0
