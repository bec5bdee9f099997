"""Progress bars and Ctrl-C for the CLI's long-running commands.

The library reports progress through a plain callback, `progress(done, total)`, and knows
nothing of Rich; `progress_bar` turns it into a Rich bar with an ETA on stderr. The bar is
transient (gone when the work ends) and off when the command is `quiet` (`--json`, or work
that is quick this time) or stderr is not a terminal, so piped output, logs and tests see
nothing of it. A command that runs several long steps (`validate all`) names each step's
place in its bar's label (`progress_stage`): one bar at a time, never nested. `interrupted`
is what every command says on Ctrl-C: what was kept, and how to go on; exit code 130
(128 + SIGINT).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from perfcast.cli._console import is_terminal, new_console
from perfcast.progress import ProgressFn

__all__ = ["INTERRUPTED_EXIT", "interrupted", "progress_bar", "progress_stage",
           "wants_bar"]

INTERRUPTED_EXIT = 130  # the shell's code for a command stopped by SIGINT
_STAGE: ContextVar[str] = ContextVar("progress_stage", default="")


def wants_bar(quiet: bool = False) -> bool:
    """A bar is drawn only for a person watching (stderr a terminal) of a command not told to
    be `quiet` (`--json`, or work too short to need one)."""
    return not quiet and is_terminal(stderr=True)


@contextmanager
def progress_stage(stage: str) -> Iterator[None]:
    """Within the block, every bar's label begins with `stage` (e.g. "3/6 "): where the
    step the bar measures stands in the whole command."""
    token = _STAGE.set(stage)
    try:
        yield
    finally:
        _STAGE.reset(token)


@contextmanager
def progress_bar(label: str, quiet: bool = False) -> Iterator[ProgressFn | None]:
    """A `progress(done, total)` callback drawing a transient bar with an ETA on stderr;
    None when `wants_bar` says no (the library's calls take None: no reporting at all)."""
    if not wants_bar(quiet):
        yield None
        return
    label = _STAGE.get() + label
    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("eta"), TimeRemainingColumn(),
                   console=new_console(stderr=True), transient=True)
    with bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def interrupted(message: str) -> None:
    """Ctrl-C: one line on stderr, `interrupted: <what was kept; how to go on>`, exit 130."""
    typer.echo(f"interrupted: {message}", err=True)
    raise typer.Exit(code=INTERRUPTED_EXIT)
