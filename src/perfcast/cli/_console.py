"""The CLI's consoles and tables: every value printed in full, in a terminal, a pipe or a CI log.

Rich sizes a console to the terminal, and to 80 columns when there is none (a pipe, a file,
a CI log), and cuts a cell that does not fit with '…': `perfcast models | cat` printed
`llam…` for every Llama. So a console writing to anything but a terminal is plain (no
colour) and as wide as any table needs, and a table's cells wrap within their column
(`overflow="fold"`) in a terminal too narrow for them, instead of being cut.

`--format csv|md` (cli._common.emit) prints the same tables as data: within `tables_as`, the
stdout console `new_console` makes writes each table as CSV or a Markdown pipe table, so no
command formats its output twice. And the help: `HelpGroup`/`_tidy_help` show flags as flags,
fold what does not fit, and keep the `Advanced` panels for `--help-all`.
"""

from __future__ import annotations

import copy
import csv
import functools
import inspect
import io
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, get_args

import typer
from rich import table as _rich_table
from rich.console import Console
from rich.json import JSON
from rich.markup import escape
from rich.text import Text
from typer import _click
from typer._coercion import bool_flag_type_descriptor
from typer.core import TyperGroup, TyperOption

__all__ = ["OUTPUT_FORMATS", "PLAIN_WIDTH", "Advanced", "HelpGroup", "Table", "in_panel",
           "network_line",
           "calibration_lines", "is_terminal", "new_console", "rule", "stack_summary",
           "tables_as"]

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
    wide enough for any table) columns wide otherwise; within `tables_as("csv"|"md")`, a
    stdout console that prints tables as data (`_DataConsole`). Made where it prints, so it
    sees the stream and format of that moment (tests swap sys.stdout)."""
    fmt = _TABLES_AS.get()
    if not stderr and fmt is not None and fmt.name != "table":
        return _DataConsole(fmt)
    if is_terminal(stderr):
        return Console(stderr=stderr, width=width)
    return _plain_console(stderr, width or PLAIN_WIDTH)


def _plain_console(stderr: bool, width: int = PLAIN_WIDTH) -> Console:
    return Console(stderr=stderr, width=width, color_system=None, highlight=False, emoji=False)


def rule(title: str, stderr: bool = False) -> None:
    """A section heading: a rule across the terminal, or RULE_WIDTH columns without one."""
    new_console(stderr, None if is_terminal(stderr) else RULE_WIDTH).rule(title)


# --format: how a command's tables print. `json` never reaches a console (cli._common.emit
# prints the payload instead).
OUTPUT_FORMATS = ("table", "json", "csv", "md")


@dataclass
class _Format:
    """The format tables print in, and how many have printed (CSV puts a blank line between)."""

    name: str
    tables: int = 0


_TABLES_AS: ContextVar[_Format | None] = ContextVar("perfcast_tables_as", default=None)


@contextmanager
def tables_as(fmt: str) -> Iterator[None]:
    """Within: every table printed on stdout through `new_console` is `fmt`: `table` (Rich's),
    `csv` (comma-separated, a '# title' line above, and nothing else on stdout: other text
    goes to stderr) or `md` (a GitHub pipe table under a '### title' heading; other text as
    paragraphs)."""
    token = _TABLES_AS.set(_Format(fmt))
    try:
        yield
    finally:
        _TABLES_AS.reset(token)


class _DataConsole(Console):
    """The stdout console of `--format csv|md`: `print` writes a Rich table as data, every
    cell in full and without markup; other renderables as `tables_as` says."""

    def __init__(self, fmt: _Format) -> None:
        super().__init__(width=PLAIN_WIDTH, color_system=None, highlight=False, emoji=False)
        self._fmt = fmt

    def print(self, *objects: Any, **kwargs: Any) -> None:  # type: ignore[override]
        for obj in objects:
            if isinstance(obj, _rich_table.Table):
                self.file.write(_as_csv(obj, self._fmt.tables) if self._fmt.name == "csv"
                                else _as_markdown(obj))
                self._fmt.tables += 1
            elif self._fmt.name == "csv":
                new_console(stderr=True).print(obj, **kwargs)
            else:
                self.file.write(self._markdown_text(obj, **kwargs))

    def rule(self, title: str = "", **kwargs: Any) -> None:  # type: ignore[override]
        if self._fmt.name == "csv":
            rule(title, stderr=True)
        else:
            self.file.write(f"## {_plain(title)}\n\n")

    def _markdown_text(self, obj: Any, **kwargs: Any) -> str:
        """A non-table renderable as Markdown: JSON fenced, text one paragraph a line."""
        with self.capture() as captured:
            super().print(obj, **kwargs)
        text = captured.get().strip("\n")
        if isinstance(obj, JSON):
            return f"```json\n{text}\n```\n\n"
        lines = [line.rstrip() for line in text.splitlines() if line.strip()]
        return "".join(f"{line}\n\n" for line in lines)


def _plain(cell: Any) -> str:
    """A table cell or title as plain text: markup applied (so dropped), nothing cut."""
    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        return Text.from_markup(cell).plain
    console = _plain_console(stderr=False)
    with console.capture() as captured:
        console.print(cell)
    return captured.get().strip("\n")


def _cells(table: _rich_table.Table) -> tuple[list[str], list[list[str]]]:
    """A table's headers and rows, as plain text."""
    columns = [[_plain(cell) for cell in column.cells] for column in table.columns]
    return [_plain(c.header) for c in table.columns], [list(r) for r in zip(*columns, strict=True)]


def _title(table: _rich_table.Table) -> str:
    """A table's title on one line ('' without one)."""
    return " ".join(_plain(table.title).split()) if table.title else ""


def _as_csv(table: _rich_table.Table, printed_before: int) -> str:
    """The table as CSV: a '# title' line, the header row, the rows; a blank line before it
    when another table came first."""
    headers, rows = _cells(table)
    out = io.StringIO()
    if printed_before:
        out.write("\n")
    if table.title:
        out.write(f"# {_title(table)}\n")
    csv.writer(out, lineterminator="\n").writerows([headers, *rows])
    return out.getvalue()


def _as_markdown(table: _rich_table.Table) -> str:
    """The table as a GitHub pipe table under a '### title' heading: '|' and '\\' escaped,
    line breaks as <br>, right-justified columns right-aligned."""
    headers, rows = _cells(table)

    def line(cells: list[str]) -> str:
        escaped = (c.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "<br>")
                   for c in cells)
        return "| " + " | ".join(escaped) + " |"

    align = ["---:" if c.justify == "right" else "---" for c in table.columns]
    title = f"### {_title(table)}\n\n" if table.title else ""
    return title + "".join(f"{line(r)}\n" for r in [headers, align, *rows]) + "\n"


class Table(_rich_table.Table):
    """A Rich table whose cells wrap within their column (`overflow="fold"`) when it does not
    fit the console, so no value is ever cut to '…'."""

    def add_column(self, *args, overflow: str = "fold", **kwargs) -> None:  # type: ignore[override]
        super().add_column(*args, overflow=overflow, **kwargs)


class Advanced(StrEnum):
    """The help panels `--help` leaves out, named here once: options a first run does not
    need. A command's `--help` ends with a line naming the ones it has, and its `--help-all`
    lists them too, so that `--help` stays under a screen (60 lines at 80 columns)."""

    MOE_PRECISION = "MoE and precision"
    ENGINE_INTERNALS = "Engine internals"
    ARRIVALS = "Arrivals"
    CHATS = "Chats"
    SPECULATIVE = "Speculative decoding"
    DISAGGREGATION = "Disaggregation"
    COLOCATION = "Co-location"
    PLAN_DETAILS = "Plan details"
    NETWORK = "Network"
    MODES = "RLHF and out-of-memory plans"
    KERNELS = "Kernels"
    INFER_WORKLOAD = "With --workload infer"
    SEARCH = "Retrieval details"
    TRACE = "Trace output"


HELP_ALL = "--help-all"


class HelpGroup(TyperGroup):
    """The `perfcast` command group. Its help, and every subcommand's, shows a flag (`--json`,
    `--quick`, `--help`) as a flag, without the `<bool>` typer prints beside it, which
    invites `--json true`; a docstring's paragraphs flow to the terminal's width instead
    of breaking where the source lines do; and the `Advanced` panels wait for `--help-all`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _tidy_help(self)

    def format_help(self, ctx: _click.Context, formatter: Any) -> None:
        _fold_help_texts()  # `perfcast` alone prints this help without --help's callback
        super().format_help(ctx, formatter)


def _tidy_help(command: _click.Command) -> None:
    """Flags of `command` and of its subcommands (help included) get an empty metavar, which
    typer's help prints instead of the type; defaults join their option's help text; the
    commands' help texts are reflowed; `--help` folds what does not fit (`_show_help`)."""
    ctx = _click.Context(command)
    help_option = command.get_help_option(ctx)
    help_option.callback = _show_help
    options = [*command.params, help_option]
    for option in options:
        if getattr(option, "is_flag", False) and option.metavar is None:
            option.metavar = ""
        if isinstance(option, TyperOption) and getattr(command, "rich_markup_mode", None) == "rich":
            _inline_default(option, ctx)
    if command.help:
        paragraphs = inspect.cleandoc(command.help).split("\n\n")
        command.help = "\n\n".join(" ".join(p.split()) for p in paragraphs)
    _hide_advanced(command)
    for sub in getattr(command, "commands", {}).values():
        _tidy_help(sub)


def _advanced_options(command: _click.Command) -> list[TyperOption]:
    return [p for p in command.params
            if isinstance(p, TyperOption) and p.rich_help_panel in set(Advanced)]


def _hide_advanced(command: _click.Command) -> None:
    """Hide the options of `command`'s `Advanced` panels from `--help`, which then ends
    naming those panels, and give it `--help-all`, which lists them (once: tidying a command
    again changes nothing). Hidden options parse as before."""
    advanced = _advanced_options(command)
    if not advanced or any(HELP_ALL in p.opts for p in command.params):
        return
    for option in advanced:
        option.hidden = True
    panels = ", ".join(dict.fromkeys(o.rich_help_panel for o in advanced))
    command.epilog = f"More: {panels} — see {HELP_ALL}."
    command.params.append(TyperOption(
        param_decls=[HELP_ALL, "help_all"], type_descriptor=bool_flag_type_descriptor(),
        is_flag=True, expose_value=False, is_eager=True, callback=_print_full_help,
        metavar="", help="Show the advanced options too, and exit."))


@functools.cache
def _fold_help_texts() -> None:
    """Make typer's help fold an option name or a word too long for its column onto the next
    line, as `Table` does, instead of cutting it to '…' (at 80 columns the Workload panel of
    `serve --help` printed `--concurrency,--max-concurre…`). Typer builds every option's
    names and help text with these two highlighters; done on the first help printed, since
    importing typer's help module costs start-up time every other command would pay."""
    from typer import rich_utils

    for name in ("highlighter", "negative_highlighter"):
        setattr(rich_utils, name, _Folding(getattr(rich_utils, name)))


class _Folding:
    """A Rich highlighter whose texts fold instead of being cut to '…'."""

    def __init__(self, highlighter: Callable[[str | Text], Text]) -> None:
        self._highlighter = highlighter

    def __call__(self, text: str | Text) -> Text:
        out = self._highlighter(text)
        out.overflow = "fold"
        return out


def _show_help(ctx: _click.Context, _param: _click.Parameter, value: bool) -> None:
    """`--help`, as click prints it, with texts that fold (`_fold_help_texts`)."""
    if not value or ctx.resilient_parsing:
        return
    _fold_help_texts()
    typer.echo(ctx.get_help(), color=ctx.color)
    ctx.exit()


def _print_full_help(ctx: _click.Context, _param: _click.Parameter, value: bool) -> None:
    """`--help-all`: the help of a copy of the command with every option shown."""
    if not value or ctx.resilient_parsing:
        return
    _fold_help_texts()
    full = copy.copy(ctx.command)
    full.epilog = None
    full.params = [copy.copy(p) for p in ctx.command.params]
    for option in full.params:
        option.hidden = False
    typer.echo(full.get_help(ctx), color=ctx.color)
    ctx.exit()


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


def calibration_lines(kernel_info: dict) -> list[str]:
    """What a user `--calibration` changed in the forecast (its family/dtype corrections)
    and its warnings, one line each; nothing without one."""
    if "calibration_families" not in kernel_info:
        return []
    fams = ", ".join(kernel_info["calibration_families"]) or "no family"
    lines = [f"calibration {kernel_info['calibration']}: corrects {fams}"]
    return lines + [f"warning: {w}" for w in kernel_info.get("calibration_warnings", [])]


def stack_summary(kernel_info: dict) -> str | None:
    """One line naming the stack a forecast is for and where its kernel families come from
    (measured here, cross-generation, borrowed from another stack, roofline-only)."""
    if "stack" not in kernel_info:
        return None
    by_status: dict[str, list[str]] = {}
    for family, entry in kernel_info.get("families", {}).items():
        by_status.setdefault(entry["status"], []).append(family)
    parts = [f"{status}: {', '.join(fams)}" for status, fams in by_status.items()]
    line = f"stack {kernel_info['stack']} — " + "; ".join(parts) if parts else \
        f"stack {kernel_info['stack']}"
    envelope = kernel_info.get("learned_envelope")
    if envelope:  # --kernel-model learned: where the trees price this GPU, where physics does
        trees = sorted(f for f, how in envelope.items() if how.startswith("learned"))
        physics = sorted(f for f in envelope if f not in trees)
        why = sorted({envelope[f].removeprefix("learned, ") for f in trees} - {"learned"})
        line += ("\nlearned kernel model: trees for " + (", ".join(trees) or "no family")
                 + (f" ({'; '.join(why)})" if why else "")
                 + ("; physical model (outside the trees' training envelope) for "
                    + ", ".join(physics) if physics else ""))
    return line


def network_line(net: dict) -> str:
    """One line naming the network a forecast priced (api network_summary's dict)."""
    stream = ("the adapter's" if net["stream_gbps"] is None
              else f"{net['stream_gbps']:,.2f} GB/s")
    return (f"network: {net['adapter_gbps']:,.1f} GB/s adapters ({net['gpus_per_nic']} GPU(s) "
            f"each), per-GPU stream {stream}, hop {net['hop_latency_us']:,.1f} us")
