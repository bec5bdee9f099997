"""The table of `perfcast`'s commands, and the group that imports a command only to run it.

Importing every command module made `perfcast --help` (and `--version`) take over a second:
the modules import perfcast.api, which imports pandas and scipy. COMMANDS is the one place
the commands are listed: each one's name, where it is defined (a command function or a
sub-Typer, in a module of perfcast.cli), the line `perfcast --help` shows for it and its
help panel. `LazyGroup` lists the commands from the table, imports one when it is invoked
(`perfcast infer ...`, `perfcast infer --help`), and formats its own help from the table
alone. tests/cli/test_cli_lazy.py checks the table against the commands it names.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import typer
from typer import _click
from typer.core import MarkupMode, TyperCommand

from perfcast.cli._console import HelpGroup, _tidy_help

__all__ = ["COMMANDS", "CommandEntry", "LazyGroup"]


@dataclass(frozen=True)
class CommandEntry:
    """`perfcast <name>` runs `perfcast.cli.<module>.<attr>`, a command function or a
    sub-Typer. `summary` is the first paragraph of its help, which `perfcast --help` lists;
    `panel` is the help panel it is listed under (None: typer's "Commands")."""

    name: str
    module: str
    attr: str
    summary: str
    panel: str | None = None

    def stand_in(self) -> TyperCommand:
        """A command that is only a name, a summary and a panel: enough to list it."""
        return TyperCommand(name=self.name, help=self.summary, rich_help_panel=self.panel)

    def build(self, markup_mode: MarkupMode, suggest_commands: bool) -> _click.Command:
        """Import the command and build it as `app.command(name)(fn)` or
        `app.add_typer(sub, name=name)` on the top-level app would, help tidied as
        HelpGroup tidies its commands."""
        target = getattr(importlib.import_module(f"perfcast.cli.{self.module}"), self.attr)
        parent = typer.Typer(rich_markup_mode=markup_mode, suggest_commands=suggest_commands)
        if isinstance(target, typer.Typer):
            parent.add_typer(target, name=self.name, rich_help_panel=self.panel)
        else:
            parent.command(self.name, rich_help_panel=self.panel)(target)
        command = typer.main.get_group(parent).commands[self.name]
        _tidy_help(command)
        return command


# In the order `perfcast --help` lists them (typer listed the sub-Typers last).
COMMANDS = (
    CommandEntry("suite", "_suite", "suite",
                 "Run the scenarios of SCENARIOS.md: coverage (supported / partial / "
                 "unsupported), their target metrics, and a Markdown + JSON report."),
    CommandEntry("run", "_suite", "run",
                 "Run one scenario file: every variant, and whether each target metric was "
                 "printed."),
    CommandEntry("models", "_catalog_cmds", "models",
                 "List the catalog models (shipped HuggingFace config.json files)."),
    CommandEntry("stacks", "_catalog_cmds", "stacks",
                 "List the software stacks and, per kernel family, whether it is measured on "
                 "that stack (on which devices), borrowed from another stack's kernels, or "
                 "roofline-only."),
    CommandEntry("infer", "_infer", "infer",
                 "Forecast TTFT, TPOT, end-to-end latency and memory of one request or a "
                 "static batch."),
    CommandEntry("step", "_step", "step",
                 "Forecast one iteration: time, 90% interval and where the time goes."),
    CommandEntry("train", "_train", "train",
                 "Forecast one training iteration: time, tokens/s, MFU, memory per GPU and "
                 "where the time goes (compute, exposed communication, pipeline bubble, "
                 "optimizer)."),
    CommandEntry("serve", "_serve", "serve",
                 "Simulate serving under load: TTFT, TPOT, E2E, throughput, goodput, KV use."),
    CommandEntry("measure", "_measure", "measure",
                 "Time kernels (with --model: a model's own and its whole steps) on this "
                 "machine into a measurement file."),
    CommandEntry("calibrate", "_calibrate", "calibrate",
                 "Fit this device's own kernel corrections, kept where they beat the shipped "
                 "model out of sample."),
    CommandEntry("collective", "_collective", "collective",
                 "Seconds, algorithm and bus bandwidth of one collective (NCCL conventions)."),
    CommandEntry("accel", "_accel", "accel",
                 "Map a model's layers onto an accelerator: cycles, utilisation, energy "
                 "breakdown."),
    CommandEntry("selfcheck", "_selfcheck", "selfcheck",
                 "Measure, calibrate and check a model's steps on this machine (S8)."),
    CommandEntry("cpu", "_cpu", "cpu",
                 "Forecast a model's forward on this CPU (target-measured), then measure it "
                 "(torch)."),
    CommandEntry("diffusion", "_diffusion", "diffusion",
                 "Forecast latency per image: text encoders + steps x UNet + VAE decode."),
    CommandEntry("rag", "_rag", "rag",
                 "Forecast a RAG request's end-to-end latency: embed, search, prefill, "
                 "decode."),
    CommandEntry("ui", "_ui", "ui",
                 "Start the web UI: choose model, hardware, plan and workload; see the "
                 "forecast."),
    CommandEntry("sweep", "_sweep", "sweep",
                 "Run a command over a grid of options; results to Parquet (query with "
                 "`perfcast query`)."),
    CommandEntry("query", "_sweep", "query",
                 "DuckDB SQL over sweep results (the table is `results`)."),
    CommandEntry("capacity", "_sweep", "capacity",
                 "Cheapest GPU type x TP x replicas meeting P99 TTFT/TPOT SLOs at a target "
                 "QPS (X15)."),
    CommandEntry("hardware", "_catalog_cmds", "hardware_app", "GPU, CPU and cluster catalog."),
    CommandEntry("validate", "_validate", "validate_app", "Accuracy against real measurements."),
    CommandEntry("plot", "_plot", "plot_app",
                 "Draw a forecast or a result table as PNG or SVG."),
)
_BY_NAME = {entry.name: entry for entry in COMMANDS}


class _Commands(Mapping[str, _click.Command]):
    """The group's commands by name, in the table's order; a command is built (its module
    imported) the first time it is looked up. Names and membership never import."""

    def __init__(self, markup_mode: MarkupMode, suggest_commands: bool) -> None:
        self._markup_mode = markup_mode
        self._suggest_commands = suggest_commands
        self._built: dict[str, _click.Command] = {}

    def __getitem__(self, name: str) -> _click.Command:
        if name not in self._built:
            self._built[name] = _BY_NAME[name].build(self._markup_mode, self._suggest_commands)
        return self._built[name]

    def __contains__(self, name: object) -> bool:
        return name in _BY_NAME

    def __iter__(self) -> Iterator[str]:
        return iter(_BY_NAME)

    def __len__(self) -> int:
        return len(_BY_NAME)


class LazyGroup(HelpGroup):
    """The top-level `perfcast` group: its commands are COMMANDS, each imported when it is
    invoked. The app registers no command itself (typer would import and build them all)."""

    def __init__(self, **kwargs: Any) -> None:
        if kwargs.get("commands"):
            raise TypeError("perfcast's commands are listed in cli._lazy.COMMANDS, not "
                            f"registered on the app: {sorted(kwargs['commands'])}")
        super().__init__(**kwargs)
        self.commands = _Commands(self.rich_markup_mode, self.suggest_commands)

    def list_commands(self, ctx: _click.Context) -> list[str]:
        return list(self.commands)  # names only: typer's list_commands builds every command

    def format_help(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        """This group's help lists its commands from their stand-ins: no command imported."""
        listed = copy.copy(self)
        listed.commands = {entry.name: entry.stand_in() for entry in COMMANDS}
        HelpGroup.format_help(listed, ctx, formatter)
