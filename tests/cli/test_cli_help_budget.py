"""Help that fits a screen (issue 16: "help under ~60 lines per command with advanced options
grouped in panels"): every command's `--help` is at most 60 lines at 80 and 100 columns; the
options of the advanced panels (`cli._console.Advanced`) wait for `--help-all`, which the
last line of `--help` names them for, and still work when given."""

from __future__ import annotations

import json

import pytest
import typer.main
from typer import _click
from typer.core import TyperOption
from typer.testing import CliRunner

from perfcast.api import ServeRequest, run
from perfcast.cli import app
from perfcast.cli._console import Advanced

runner = CliRunner()
BUDGET_LINES = 60


def _walk(command: _click.Command, path: tuple[str, ...]):
    yield path, command
    for name in getattr(command, "commands", {}):
        yield from _walk(command.commands[name], (*path, name))


COMMANDS = dict(_walk(typer.main.get_command(app), ()))


def _help(path: tuple[str, ...], flag: str = "--help", columns: int = 100) -> str:
    res = runner.invoke(app, [*path, flag], env={"COLUMNS": str(columns)})
    assert res.exit_code == 0, res.output
    return res.stdout


def _flat(text: str) -> str:
    """Help text with the panels' borders and line breaks gone: words as a reader sees them."""
    return " ".join(text.replace("│", " ").split())


def _options(command: _click.Command) -> list[str]:
    return [opt for p in command.params if isinstance(p, TyperOption) for opt in p.opts]


def _advanced_panels(command: _click.Command) -> list[str]:
    panels = [getattr(p, "rich_help_panel", None) for p in command.params]
    return list(dict.fromkeys(p for p in panels if p in set(Advanced)))


def _ids(path: tuple[str, ...]) -> str:
    return " ".join(path) or "perfcast"


@pytest.mark.parametrize("columns", [80, 100])
@pytest.mark.parametrize("path", list(COMMANDS), ids=_ids)
def test_every_help_fits_the_budget(path, columns):
    assert len(_help(path, columns=columns).splitlines()) <= BUDGET_LINES


@pytest.mark.parametrize("path", list(COMMANDS), ids=_ids)
def test_every_option_is_in_help_or_help_all(path):
    command = COMMANDS[path]
    panels = _advanced_panels(command)
    shown = _flat(_help(path))
    full = _flat(_help(path, "--help-all")) if panels else shown
    for option in _options(command):
        assert option in full, option
    if panels:
        assert shown.endswith(f"More: {', '.join(panels)} — see --help-all.")
        for panel in panels:
            assert f"─ {panel} ─" not in shown and f"─ {panel} ─" in full, panel
    else:  # no --help-all where nothing is hidden
        assert "--help-all" not in _options(command)


def test_serve_keeps_the_everyday_options_in_help_and_hides_the_advanced_ones():
    shown = _flat(_help(("serve",), columns=80))
    for option in ("--model", "--gpu", "--cluster", "--tp", "--pp", "--replicas", "--dtype",
                   "--scheduler", "--max-batch", "--max-batch-tokens", "--chunk-size", "--qps",
                   "--concurrency", "--num-requests", "--lengths", "--prompt-tokens",
                   "--output-tokens", "--trace", "--csv", "--seed", "--ttft-slo", "--tpot-slo",
                   "--out", "--json", "--format"):
        assert f"{option} " in shown or f"{option}," in shown, option
    for option in ("--router", "--block-size", "--spec-k", "--disagg-prefill", "--colocate",
                   "--trace-out", "--ep", "--weight-dtype", "--turns", "--arrival"):
        assert option not in shown, option


def test_help_all_of_a_command_without_advanced_options_is_refused():
    res = runner.invoke(app, ["models", "--help-all"])
    assert res.exit_code == 2


def test_hidden_options_still_work():
    args = ["serve", "--gpu", "h100-sxm", "--qps", "5", "--num-requests", "20",
            "--block-size", "32", "--router", "least-kv", "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    expected = run(ServeRequest.from_options({"gpu": "h100-sxm", "qps": 5, "num_requests": 20,
                                              "block_size": 32, "router": "least-kv"}))
    assert json.loads(res.stdout) == json.loads(json.dumps(expected.payload()))
    plain = run(ServeRequest.from_options({"gpu": "h100-sxm", "qps": 5, "num_requests": 20}))
    assert json.loads(res.stdout)["kv_blocks"] != plain.payload()["kv_blocks"]  # it took effect


def test_help_all_needs_no_required_option():
    """`--help-all` is eager, like `--help`: `plot breakdown` requires --out."""
    text = _flat(_help(("plot", "breakdown"), "--help-all"))
    assert "--vary" in text and "--kernel-model" in text and "--weight-dtype" in text
