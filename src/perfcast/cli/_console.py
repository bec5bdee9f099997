"""The CLI's consoles and tables: every value printed in full, in a terminal, a pipe or a CI log.

Rich sizes a console to the terminal, and to 80 columns when there is none (a pipe, a file,
a CI log), and cuts a cell that does not fit with '…': `perfcast models | cat` printed
`llam…` for every Llama. So a console writing to anything but a terminal is plain (no
colour) and as wide as any table needs, and a table's cells wrap within their column
(`overflow="fold"`) in a terminal too narrow for them, instead of being cut.
"""

from __future__ import annotations

import copy
import inspect
import sys
from typing import Annotated, Any, get_args

from rich import table as _rich_table
from rich.console import Console
from rich.markup import escape
from typer import _click
from typer.core import TyperGroup, TyperOption

__all__ = ["PLAIN_WIDTH", "HelpGroup", "Table", "in_panel", "is_terminal", "new_console", "rule"]

# Columns of a console that writes to a pipe or file: wider than any table perfcast prints
# (lines are not padded to it, so it costs nothing).
PLAIN_WIDTH = 10_000
RULE_WIDTH = 100  # a rule (a section heading) spans this much when there is no terminal


def is_terminal(stderr: bool = False) -> bool:
    """Whether stdout (or stderr) is an interactive terminal."""
    stream = sys.stderr if stderr else sys.stdout
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no stream, or a closed one
        return False


def new_console(stderr: bool = False, width: int | None = None) -> Console:
    """A console for stdout (or stderr): Rich's own in a terminal; plain and `width` (default:
    wide enough for any table) columns wide otherwise. Made where it prints, so it sees the
    stream of that moment (tests swap sys.stdout)."""
    if is_terminal(stderr):
        return Console(stderr=stderr, width=width)
    return Console(stderr=stderr, width=width or PLAIN_WIDTH, color_system=None,
                   highlight=False, emoji=False)


def rule(title: str, stderr: bool = False) -> None:
    """A section heading: a rule across the terminal, or RULE_WIDTH columns without one."""
    new_console(stderr, None if is_terminal(stderr) else RULE_WIDTH).rule(title)


class Table(_rich_table.Table):
    """A Rich table whose cells wrap within their column (`overflow="fold"`) when it does not
    fit the console, so no value is ever cut to '…'."""

    def add_column(self, *args, overflow: str = "fold", **kwargs) -> None:  # type: ignore[override]
        super().add_column(*args, overflow=overflow, **kwargs)


class HelpGroup(TyperGroup):
    """The `perfcast` command group. Its help, and every subcommand's, shows a flag (`--json`,
    `--quick`, `--help`) as a flag, without the `<bool>` typer prints beside it, which
    invites `--json true`; and a docstring's paragraphs flow to the terminal's width instead
    of breaking where the source lines do."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _tidy_help(self)


def _tidy_help(command: _click.Command) -> None:
    """Flags of `command` and of its subcommands (help included) get an empty metavar, which
    typer's help prints instead of the type; defaults join their option's help text; the
    commands' help texts are reflowed."""
    ctx = _click.Context(command)
    options = [*command.params, command.get_help_option(ctx)]
    for option in options:
        if getattr(option, "is_flag", False) and option.metavar is None:
            option.metavar = ""
        if isinstance(option, TyperOption) and getattr(command, "rich_markup_mode", None) == "rich":
            _inline_default(option, ctx)
    if command.help:
        paragraphs = inspect.cleandoc(command.help).split("\n\n")
        command.help = "\n\n".join(" ".join(p.split()) for p in paragraphs)
    for sub in getattr(command, "commands", {}).values():
        _tidy_help(sub)


def _inline_default(option: TyperOption, ctx: _click.Context) -> None:
    """Put '[default: X]' at the end of the option's help text (as typer words it), where it
    flows with the text, instead of on a line of its own whenever the text wraps."""
    if option.show_default is not True or not option.help:
        return
    if option.is_bool_flag and not option.default:
        option.show_default = False  # off unless given: a default says nothing more
        return
    value = option._extract_default_help_str(ctx=ctx)
    if value is not None:
        text = option._get_default_string(ctx=ctx, show_default_is_str=False,
                                          default_value=value)
        if text:
            option.help = f"{option.help} {escape(f'[default: {text}]')}"
    option.show_default = False


def in_panel(option: Any, panel: str) -> Any:
    """A shared option declaration (`Annotated[T, typer.Option(...)]`, e.g. `JsonOption`)
    listed under the help panel `panel` of the command that uses it."""
    kind, info, *_ = get_args(option)
    info = copy.copy(info)
    info.rich_help_panel = panel
    return Annotated[kind, info]
