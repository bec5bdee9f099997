"""`perfcast --help` answered from its last rendering (cli._help_cache): byte for byte what
typer prints in the same terminal and environment, without importing typer; another
terminal, environment or CLI source is rendered afresh; a cache that cannot be written
changes nothing but the speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from perfcast.cli import _help_cache

# Runs `perfcast ARGS`, then prints whether typer was imported (stderr, after main).
PROBE = """import sys
from perfcast.cli import main
sys.argv[0] = "perfcast"
try:
    main()
finally:
    sys.stderr.write("\\nTYPER" + str("typer" in sys.modules))
"""


def _run(cache, *args: str, env: dict[str, str] | None = None, stdout=subprocess.PIPE):
    """(stdout, whether typer was imported, return code) of a fresh `perfcast ARGS`."""
    full = {k: v for k, v in os.environ.items() if not _help_cache._ENV.search(k)}
    full |= {"PERFCAST_CACHE_DIR": str(cache)} | (env or {})
    done = subprocess.run([sys.executable, "-c", PROBE, *args], env=full, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    head, _, typer = done.stderr.rpartition("\nTYPER")
    assert head == ""  # nothing else on stderr
    return done.stdout, typer == "True", done.returncode


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("perfcast-cache")


TERMINALS = [{}, {"COLUMNS": "60"}, {"COLUMNS": "140"}, {"FORCE_COLOR": "1"},
             {"NO_COLOR": "1", "COLUMNS": "90"}, {"TERMINAL_WIDTH": "70"}]


@pytest.mark.parametrize("env", TERMINALS, ids=lambda e: " ".join(f"{k}={v}" for k, v in
                                                                  e.items()) or "plain")
def test_the_replay_is_typers_own_rendering(cache, env):
    """Each environment's first run renders with typer (no other environment's rendering
    answers it: the cache is shared by every case), its second replays without typer, and
    both equal typer's output with the cache turned off."""
    live, live_typer, live_rc = _run(cache, "--help", env=env)
    again, again_typer, again_rc = _run(cache, "--help", env=env)
    fresh, _, _ = _run("", "--help", env=env)
    assert (live_rc, again_rc) == (0, 0)
    assert live_typer and not again_typer
    assert live == again == fresh
    assert "perfcast [OPTIONS] COMMAND" in live


def test_distinct_terminals_render_distinctly(cache):
    assert len({_run(cache, "--help", env=env)[0] for env in TERMINALS}) >= 4


def test_an_edited_cli_source_is_another_key(tmp_path, monkeypatch):
    (tmp_path / "_lazy.py").write_text("COMMANDS = ()\n")
    monkeypatch.setattr(_help_cache, "_SOURCES", tmp_path)
    before = _help_cache.help_key(("--help",))
    (tmp_path / "_lazy.py").write_text("COMMANDS = ('new',)\n")
    assert _help_cache.help_key(("--help",)) not in (before, None)


@pytest.mark.parametrize("args", [("--version",), ("infer", "--help"), ("--help", "--x"), ()])
def test_only_the_top_level_help_is_replayed(args):
    assert _help_cache.help_key(args) is None


def test_a_shell_completion_is_never_replayed(monkeypatch):
    monkeypatch.setenv("_PERFCAST_COMPLETE", "bash_complete")
    assert _help_cache.help_key(("--help",)) is None


def test_a_cache_that_cannot_be_written_changes_only_the_speed(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    out, typer, rc = _run(blocker, "--help")
    assert rc == 0 and typer and "perfcast [OPTIONS] COMMAND" in out
    assert _run(blocker, "--help")[1]  # rendered again: nothing was stored


def test_the_newest_renderings_are_kept(tmp_path):
    for columns in range(60, 60 + _help_cache.KEEP + 3):
        _run(tmp_path, "--help", env={"COLUMNS": str(columns)})
    assert len(list((tmp_path / "help").glob("*.txt"))) == _help_cache.KEEP
    assert not list((tmp_path / "help").glob("*.tmp"))


def test_a_replay_to_a_closed_pipe_ends_quietly(cache):
    _run(cache, "--help")  # stored
    reader = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.close()"],
                              stdin=subprocess.PIPE)
    reader.wait()
    _, typer, rc = _run(cache, "--help", stdout=reader.stdin)
    reader.stdin.close()
    assert not typer and rc == 1  # as rich ends typer's own rendering on a closed pipe


def test_the_cache_directory_is_one_place():
    from perfcast.kernels._json_cache import cache_dir

    assert cache_dir is _help_cache.cache_dir
    assert json.loads(json.dumps(_help_cache.REPLAYED)) == [["--help"]]
