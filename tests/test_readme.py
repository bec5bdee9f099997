"""The README runs as written: every `perfcast ...` line of its tour and command list.

Each command of the ```bash blocks under "A five-minute tour" and "Commands" runs through the
CLI, in README order, in one scratch folder, so outputs that collide or a `query` that no
longer matches its sweep fail here. Commands that cannot run in CI are listed in `SKIPPED`
with the reason; a skip names a prefix of the command line.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

README = Path(__file__).resolve().parents[1] / "README.md"
SECTIONS = ("A five-minute tour", "Commands")

# (prefix of the command line, why it does not run in the test)
SKIPPED: tuple[tuple[str, str], ...] = (
    ("perfcast ui", "starts a Streamlit server and blocks"),
    ("perfcast infer --model-config path/to/config.json",
     "placeholder path for the user's own config.json"),
    ("perfcast validate kernels", "full refit per held-out split: minutes of CPU"),
    ("perfcast validate models", "81 measured configurations: tens of seconds of CPU"),
    ("perfcast validate serving", "simulates every measured serving point: minutes of CPU"),
    ("perfcast validate training", "216 training configurations: tens of seconds of CPU"),
    ("perfcast measure --out cpu-torch.parquet --quick --backend torch",
     "eager torch microbenchmarks: ~10 s of CPU, needs perfcast[torch]"),
    ("perfcast cpu", "runs torch on this CPU and times it: slow and load-dependent"),
    ("perfcast measure --out gpt2.parquet --model gpt2",
     "times GPT-2's kernels and steps with torch: ~30 s of CPU"),
    ("perfcast selfcheck", "measures and calibrates this CPU: ~40 s, load-dependent"),
)


def section_text(markdown: str, title: str) -> str:
    """The text of the `## title` section, up to the next level-2 heading."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", markdown, re.M | re.S)
    assert match, f"README has no section {title!r}"
    return match.group(1)


def bash_blocks(text: str) -> list[str]:
    """The bodies of the ```bash fenced blocks in `text`."""
    return re.findall(r"^```bash\n(.*?)^```", text, re.M | re.S)


def command_lines(block: str) -> list[str]:
    """Logical `perfcast` lines of a block: `\\` continuations joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", block)
    lines = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["perfcast"]:
            lines.append(shlex.join(words))
    return lines


def readme_commands() -> list[str]:
    """Every `perfcast ...` line of the tour and the command list, in README order."""
    markdown = README.read_text(encoding="utf-8")
    return [line for title in SECTIONS for block in bash_blocks(section_text(markdown, title))
            for line in command_lines(block)]


def skip_reason(line: str) -> str | None:
    """Why `line` is not run, or None when it is."""
    return next((why for prefix, why in SKIPPED if line.startswith(prefix)), None)


COMMANDS = readme_commands()


def test_readme_has_commands_and_every_skip_matches_one():
    assert len(COMMANDS) > 20
    for prefix, _ in SKIPPED:
        assert any(line.startswith(prefix) for line in COMMANDS), f"stale skip {prefix!r}"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """One folder shared by every README command, as a user running it top to bottom."""
    return tmp_path_factory.mktemp("readme")


@pytest.mark.parametrize("line", COMMANDS, ids=[f"{i:02d}" for i in range(len(COMMANDS))])
def test_readme_command_runs(line, scratch, monkeypatch):
    reason = skip_reason(line)
    if reason:
        pytest.skip(reason)
    from perfcast.cli import app

    monkeypatch.chdir(scratch)
    result = CliRunner().invoke(app, shlex.split(line)[1:])
    assert result.exit_code == 0, f"{line}\n{result.output}\n{result.exception!r}"
