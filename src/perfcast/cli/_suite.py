"""`perfcast suite` (the 40 scenarios of SCENARIOS.md) and `perfcast run FILE.yaml`."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from perfcast.cli._common import FormatOption, JsonOption, emit, guarded, output_format
from perfcast.cli._console import Table, new_console
from perfcast.cli._progress import interrupted, progress_bar
from perfcast.errors import InputError, check_output_folder, close_matches, writing
from perfcast.suite import (
    ScenarioResult,
    builtin_scenarios,
    format_value,
    load_scenario,
    run_scenario,
    run_suite,
    suite_markdown,
    suite_summary,
)

__all__ = ["run", "suite"]

_STYLE = {"supported": "green", "partial": "yellow", "unsupported": "red"}


def _write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file in the same folder, so a reader never sees half a report."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def _table(results: list[ScenarioResult], title: str) -> Table:
    """One row per scenario. Names, labels and values are user text, printed as written
    (escaped: a variant label like [fp8] is not Rich markup)."""
    table = Table(title=escape(title), show_lines=False)
    for col in ("ID", "scenario", "status", "target metrics"):
        table.add_column(col, overflow="fold")
    for r in results:
        multi = len({v.run for v in r.values}) > 1
        metrics = "\n".join(f"{v.name}{f' [{v.run}]' if multi else ''}: "
                            f"{format_value(v.path, v.value, v.unit)}" for v in r.values)
        table.add_row(escape(r.id), escape(r.title), f"[{_STYLE[r.status]}]{r.status}[/]",
                      escape(metrics))
    return table


def _select(only: str | None):
    scenarios = builtin_scenarios()
    if not only:
        return scenarios
    ids = {s.id: s for s in scenarios}
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    for w in wanted:
        if w not in ids:
            hint = close_matches(w, ids)
            raise InputError("only", f"unknown scenario {w!r}"
                             + (f"; did you mean {hint[0]}?" if hint else ""), sorted(ids))
    return [ids[w] for w in wanted]


def _run_all(scenarios: list, workers: int, out: Path, json_out: bool
             ) -> list[ScenarioResult]:
    """`run_suite` with the CLI's progress bar; on Ctrl-C, how many scenarios had run (the
    report is written only when all have, so nothing in `out` is half-updated)."""
    finished: list[ScenarioResult] = []
    try:
        with progress_bar("scenarios", json_out) as bar:
            def done(result: ScenarioResult) -> None:
                finished.append(result)
                if bar is not None:
                    bar(len(finished), len(scenarios))

            return run_suite(scenarios, workers=workers or os.cpu_count() or 1, on_done=done)
    except KeyboardInterrupt:
        interrupted(f"{len(finished)} of {len(scenarios)} scenarios had run; nothing saved "
                    f"in {out}/ (the report is written when every scenario has run); rerun "
                    "the same command")
        raise


@guarded
def suite(
    out: Annotated[Path, typer.Option(help="Folder for suite.md and suite.json.")] = Path(
        "perfcast-suite"),
    workers: Annotated[int, typer.Option(help="Processes (default: one per core).")] = 0,
    only: Annotated[str | None, typer.Option(help="Comma-separated scenario IDs, e.g. "
                                             "I1.1,X6.")] = None,
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """Run the scenarios of SCENARIOS.md: coverage (supported / partial / unsupported), their
    target metrics, and a Markdown + JSON report."""
    fmt = output_format(json_out, format_out)
    check_output_folder(out, "out")
    if workers < 0:
        raise InputError("workers", f"must be >= 0, got {workers}", "0 (one per core) or more")
    scenarios = _select(only)
    start = time.perf_counter()
    results = _run_all(scenarios, workers, out, fmt == "json")
    wall_s = time.perf_counter() - start
    summary = suite_summary(results, wall_s)
    with writing(out, "out"):
        out.mkdir(parents=True, exist_ok=True)
        _write_atomic(out / "suite.json", json.dumps(summary, indent=2) + "\n")
        _write_atomic(out / "suite.md", suite_markdown(results, wall_s))
    emit(fmt, lambda: summary, lambda: _print_suite(results, summary, out))


def _print_suite(results: list[ScenarioResult], summary: dict, out: Path) -> None:
    counts, wall_s = summary["counts"], summary["wall_s"]
    console = new_console()
    console.print(_table(results, "perfcast scenario suite"))
    console.print(f"{counts['supported']}/{len(results)} supported, {counts['partial']} "
                  f"partial, {counts['unsupported']} unsupported in {wall_s:.1f} s; report: "
                  f"{out / 'suite.md'}, {out / 'suite.json'}", markup=False)
    for r in results:
        for run_name, msg in r.errors.items():
            new_console(stderr=True).print(f"{r.id} [{run_name}]: {msg}", markup=False)


@guarded
def run(
    file: Annotated[Path, typer.Argument(help="A scenario YAML file (see the shipped ones: "
                                         "`perfcast suite` lists them).")],
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """Run one scenario file: every variant, and whether each target metric was printed."""
    fmt = output_format(json_out, format_out)
    scenario = load_scenario(file)
    result = run_scenario(scenario)
    summary = suite_summary([result])["results"][0]
    emit(fmt, lambda: summary, lambda: _print_run(scenario, result))


def _print_run(scenario, result: ScenarioResult) -> None:
    """The scenario's table; its runs' errors on stderr, and exit code 2 if there were any."""
    new_console().print(_table([result], f"{scenario.id}: {scenario.title}"))
    for run_name, msg in result.errors.items():
        new_console(stderr=True).print(f"error: {run_name}: {msg}", markup=False)
    if result.errors:
        raise typer.Exit(code=2)
