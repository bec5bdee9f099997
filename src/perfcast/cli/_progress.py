"""Progress bars and Ctrl-C for the CLI's long-running commands.

The library reports progress through a plain callback, `progress(done, total)`, and knows
nothing of Rich; `progress_bar` turns it into a Rich bar with an ETA on stderr. The bar is
transient (gone when the work ends) and off when `--json` is given or stderr is not a
terminal, so piped output, logs and tests see nothing of it. `interrupted` is what every
command says on Ctrl-C: what was kept, and how to go on; exit code 130 (128 + SIGINT).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

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

__all__ = ["INTERRUPTED_EXIT", "ProgressFn", "interrupted", "progress_bar", "wants_bar"]

ProgressFn = Callable[[int, int], None]
INTERRUPTED_EXIT = 130  # the shell's code for a command stopped by SIGINT


def wants_bar(json_out: bool = False) -> bool:
    """A bar is drawn only for a person watching: stderr a terminal, no `--json`."""
    return not json_out and is_terminal(stderr=True)


@contextmanager
def progress_bar(label: str, json_out: bool = False) -> Iterator[ProgressFn | None]:
    """A `progress(done, total)` callback drawing a transient bar with an ETA on stderr;
    None when `wants_bar` says no (the library's calls take None: no reporting at all)."""
    if not wants_bar(json_out):
        yield None
        return
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
