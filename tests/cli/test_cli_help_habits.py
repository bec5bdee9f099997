"""Habits of the ecosystem (issue 16, item 6): `--version`, a global `--debug`, help that reads
(flags without `<bool>`, advanced options in panels, a bounded length) and the names vLLM's
benchmark users type (`--request-rate`, `--num-prompts`, `--max-concurrency`)."""

import json

import pytest
from typer.testing import CliRunner

import perfcast
import perfcast.cli._debug as debug
from perfcast.cli import app

runner = CliRunner()


def _commands() -> list[list[str]]:
    """Every command path: ['serve'], ['hardware', 'list'], ..."""
    import typer.main

    def walk(group, prefix):
        for name, command in getattr(group, "commands", {}).items():
            yield from walk(command, [*prefix, name]) if hasattr(command, "commands") else (
                [[*prefix, name]])

    return list(walk(typer.main.get_command(app), []))


def _help(*path: str, columns: int = 100, flag: str = "--help") -> str:
    res = runner.invoke(app, [*path, flag], env={"COLUMNS": str(columns)})
    assert res.exit_code == 0, res.output
    return res.stdout


def test_version_prints_the_version_and_exits_0():
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0
    assert res.stdout == f"perfcast {perfcast.__version__}\n"


def test_debug_goes_before_any_command_and_turns_debug_on(monkeypatch):
    calls = []
    monkeypatch.setattr(debug, "set_debug", calls.append)
    res = runner.invoke(app, ["--debug", "hardware", "list", "--json"])
    assert res.exit_code == 0, res.output
    assert calls == [True]
    assert runner.invoke(app, ["hardware", "list", "--json"]).exit_code == 0
    assert calls == [True, False]  # each invocation sets it: one --debug run does not leak


@pytest.mark.parametrize("path", [[], *_commands()], ids=lambda p: " ".join(p) or "perfcast")
def test_help_shows_flags_as_flags(path):
    text = _help(*path)
    assert "<bool>" not in text
    assert "--help" in text


SERVE_ADVANCED = ("Speculative decoding", "Disaggregation", "Co-location", "MoE and precision",
                  "Engine internals")


def test_serve_help_is_grouped_in_panels_and_bounded():
    text = _help("serve")
    for panel in ("Workload", "Requests", "Engine", "SLOs", "Output"):
        assert f"─ {panel}" in text, panel
    for panel in SERVE_ADVANCED:  # named on the last line, listed by --help-all
        assert f"─ {panel}" not in text and panel in " ".join(text.split()), panel
        assert f"─ {panel}" in _help("serve", flag="--help-all"), panel
    assert len(text.splitlines()) <= 60  # was 139 at 100 columns, 222 at 80
    assert len(_help("serve", columns=80).splitlines()) <= 60
    for command, bound in (("train", 45), ("infer", 45), ("step", 45)):
        assert len(_help(command).splitlines()) <= bound, command


def test_train_help_panels():
    text, full = _help("train"), _help("train", flag="--help-all")
    for panel in ("Plan", "Batch", "Output"):
        assert f"─ {panel}" in text, panel
    for panel in ("Plan details", "RLHF", "Kernels", "Trace output"):
        assert f"─ {panel}" not in text and f"─ {panel}" in full, panel


def test_command_help_flows_instead_of_breaking_at_source_lines():
    """The suite docstring breaks after 'their' in the source: the help must not."""
    lines = _help(columns=100).splitlines()
    i = next(i for i, line in enumerate(lines) if "│ suite " in line)
    assert "their target metrics," in lines[i + 1]


def _serve_json(*args: str) -> dict:
    res = runner.invoke(app, ["serve", "--json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_vllm_benchmark_names_are_aliases_of_perfcast_options():
    assert _serve_json("--request-rate", "2", "--num-prompts", "12") == _serve_json(
        "--qps", "2", "--num-requests", "12")
    assert _serve_json("--max-concurrency", "3", "--num-prompts", "12") == _serve_json(
        "--concurrency", "3", "--num-requests", "12")


def test_serve_help_says_what_the_vllm_names_mean():
    text = " ".join(_help("serve", columns=200).split())
    assert "--qps,--request-rate" in text and "--num-requests,--num-prompts" in text
    assert "vLLM's --max-concurrency at its default --request-rate inf" in text
    assert "A rate capped by a concurrency is not modelled" in text
