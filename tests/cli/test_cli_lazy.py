"""Lazy command loading: `perfcast --help` and `--version` import no command module (nor
perfcast.api, pandas, scipy), `perfcast <cmd>` imports that command's module only, and the
table the top-level help is drawn from (`cli._lazy.COMMANDS`) is the commands there are."""

import importlib
import inspect
import json
import os
import pkgutil
import subprocess
import sys
import types

import pytest
import typer
import typer.main
from hypothesis import given
from hypothesis import strategies as st
from typer import _click
from typer.testing import CliRunner

import perfcast.cli
from perfcast.cli import app
from perfcast.cli._common import guarded
from perfcast.cli._lazy import COMMANDS

runner = CliRunner()
HEAVY = ("pandas", "scipy", "perfcast.api")
COMMAND_MODULES = sorted({f"perfcast.cli.{entry.module}" for entry in COMMANDS})
# What imports perfcast.cli, runs `perfcast ARGS` if given, then prints sys.modules (stderr).
PROBE = """import json, sys
from perfcast.cli import main
if sys.argv[1:]:
    sys.argv[0] = "perfcast"
    try:
        main()
    except SystemExit:
        pass
sys.stderr.write("\\nMODULES" + json.dumps(sorted(sys.modules)))
"""


def _modules_after(*args: str) -> set[str]:
    """The modules a fresh `perfcast ARGS` (no ARGS: `import perfcast.cli`) has imported, with
    typer rendering (no stored `--help`: cli._help_cache)."""
    env = {**os.environ, "PERFCAST_CACHE_DIR": ""}
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                          check=True, env=env)
    return set(json.loads(done.stderr.rpartition("\nMODULES")[2]))


@pytest.mark.parametrize("args", [(), ("--help",), ("--version",)], ids=" ".join)
def test_help_and_version_import_no_command_nor_the_library(args):
    modules = _modules_after(*args)
    # the probe ran what it says; importing perfcast.cli alone builds no typer app
    assert {"perfcast.cli", "typer"} <= modules if args else "typer" not in modules
    assert not [m for m in (*HEAVY, *COMMAND_MODULES) if m in modules]


def test_a_command_imports_its_own_module_only():
    modules = _modules_after("infer", "--help")
    assert [m for m in COMMAND_MODULES if m in modules] == ["perfcast.cli._infer"]


# What no `--help` loads: pandas, pyarrow and scipy (~0.8 s together), the kernel, compose
# and serving layers, the measurement store, the checks and plotting.
PRICING = ("pandas", "pyarrow", "scipy", "matplotlib", "perfcast.kernels._calibration",
           "perfcast.compose._step", "perfcast.serve._engine", "perfcast.measure._store",
           "perfcast.validate._reports")
HELPS = [(entry.name,) for entry in COMMANDS] + [("validate", "kernels"), ("validate", "all"),
                                                  ("plot", "pipeline")]


# What imports perfcast.cli once, then runs each `perfcast ARGS --help` (a JSON list of ARGS)
# in a forked child of that state, as a fresh `perfcast` would start, and prints {ARGS: the
# child's modules} (stderr): one interpreter start for every command instead of one each.
PROBE_MANY = """import json, os, sys
from perfcast.cli import main
found = {}
for args in json.loads(sys.argv[1]):
    read, write = os.pipe()
    if os.fork() == 0:
        os.close(read)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        sys.argv = ["perfcast", *args, "--help"]
        try:
            main()
        except SystemExit:
            pass
        os.write(write, json.dumps(sorted(sys.modules)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        found[" ".join(args)] = json.loads(pipe.read())
    os.wait()
sys.stderr.write("\\nMODULES" + json.dumps(found))
"""


@pytest.fixture(scope="module")
def help_modules() -> dict[str, set[str]]:
    """{"command [subcommand]": the modules its `--help` imported}, for every HELPS entry."""
    done = subprocess.run([sys.executable, "-c", PROBE_MANY, json.dumps(HELPS)],
                          capture_output=True, text=True, check=True)
    found = json.loads(done.stderr.rpartition("\nMODULES")[2])
    return {name: set(modules) for name, modules in found.items()}


@pytest.mark.parametrize("command", HELPS, ids=" ".join)
def test_help_loads_no_pricing_layer_nor_simulator(help_modules, command):
    """Every command's `--help` is drawn from its options (a request's fields, a check's
    allowed values): the layers that price, simulate, measure or plot load only when the
    command runs."""
    modules = help_modules[" ".join(command)]
    assert f"perfcast.cli.{_entry(command[0]).module}" in modules  # the probe ran it
    assert not [m for m in PRICING if m in modules]


def test_the_forked_probe_sees_what_a_fresh_process_imports(help_modules):
    """The fork-per-command probe against a fresh process, on one command."""
    assert help_modules["train"] == _modules_after("train", "--help")


def _entry(name: str):
    return next(entry for entry in COMMANDS if entry.name == name)


@pytest.mark.parametrize("entry", COMMANDS, ids=lambda entry: entry.name)
def test_every_listed_command_loads_and_shows_its_help(entry):
    res = runner.invoke(app, [entry.name, "--help"], env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    assert f"Usage: perfcast {entry.name} " in res.stdout


def _built(name: str) -> _click.Command:
    """The top-level group's command `name`, imported and built."""
    group = typer.main.get_command(app)
    return group.get_command(_click.Context(group), name)


@pytest.mark.parametrize("entry", COMMANDS, ids=lambda entry: entry.name)
def test_the_table_says_what_the_command_says(entry):
    """`perfcast --help` shows the table's summary and panel: they must be the command's own
    (its help's first paragraph; its panel), and a hidden or deprecated command would be
    listed differently."""
    command = _built(entry.name)
    shown = command.short_help or (command.help or "").split("\n\n")[0]
    assert shown == entry.summary
    assert command.rich_help_panel == entry.panel
    assert not command.hidden and not command.deprecated


_BOUNDARY = guarded(lambda: None).__code__  # every command runs behind the error boundary


def _defined_commands() -> dict[int, str]:
    """Every top-level command perfcast.cli's modules define, by identity: the sub-Typers, and
    the functions behind the error boundary that none of the sub-Typers registers."""
    typers, functions = {}, {}
    for info in pkgutil.iter_modules(perfcast.cli.__path__):
        module = importlib.import_module(f"perfcast.cli.{info.name}")
        for attr, value in vars(module).items():
            if isinstance(value, typer.Typer) and value is not app:  # not the top level
                typers[id(value)] = (value, f"{info.name}.{attr}")
            elif isinstance(value, types.FunctionType) and value.__code__ is _BOUNDARY:
                functions[id(value)] = f"{inspect.unwrap(value).__module__}.{attr}"
    for sub, _ in typers.values():
        for registered in sub.registered_commands:
            functions.pop(id(registered.callback), None)
    return {**{key: name for key, (_, name) in typers.items()}, **functions}


def test_the_table_lists_exactly_the_commands_there_are():
    defined = _defined_commands()
    listed = {id(getattr(importlib.import_module(f"perfcast.cli.{e.module}"), e.attr)): e.name
              for e in COMMANDS}
    assert len(listed) == len(COMMANDS) == len({e.name for e in COMMANDS})  # no entry twice
    assert sorted(defined[key] for key in set(defined) - set(listed)) == []  # not in the table
    assert sorted(listed[key] for key in set(listed) - set(defined)) == []  # not a command


def test_the_top_level_help_lists_the_table_in_order():
    res = runner.invoke(app, ["--help"], env={"COLUMNS": "100"})
    assert res.exit_code == 0
    lines = res.stdout.splitlines()
    panel = next(i for i, line in enumerate(lines) if "─ Commands " in line)
    names = [line[2:].split()[0] for line in lines[panel + 1:]
             if line.startswith("│ ") and line[2] != " "]  # not a summary's second line
    assert names == [entry.name for entry in COMMANDS]


@given(st.text(min_size=1, max_size=12))
def test_an_unknown_name_is_no_command(name):
    group = typer.main.get_command(app)
    known = name in {entry.name for entry in COMMANDS}
    assert (name in group.commands) == known
    assert (group.get_command(_click.Context(group), name) is None) == (not known)


@pytest.mark.parametrize("args", [
    ("infer", "--model", "llama-2-7b", "--gpu", "h100-sxm", "--json"),
    ("serve", "--model", "llama-2-7b", "--gpu", "a100-sxm4-80gb", "--qps", "1",
     "--num-requests", "4", "--json")], ids=lambda a: a[0])
def test_a_forecast_does_not_load_scipy_spatial(args):
    """The target-measured residuals' nearest shapes are searched directly for the batches a
    forecast prices: the KD-tree (scipy.spatial, ~0.5 s to import) waits for large batches."""
    modules = _modules_after(*args)
    assert "perfcast.kernels._residual" in modules  # the probe priced kernels
    assert "scipy.spatial" not in modules
