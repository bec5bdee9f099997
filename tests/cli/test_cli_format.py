"""`--format table|json|csv|md` on every command with `--json` (issue 16: "tables never
truncate values (wrap or `--format table|json|csv|md`)"): csv is every table as CSV on stdout
(a '# title' line above each, notes on stderr), md every table as a GitHub pipe table, json
what `--json` prints; `--json` with another format is refused."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.text import Text
from typer.testing import CliRunner

import perfcast
from perfcast.cli import app
from perfcast.cli._console import Table, new_console, tables_as

runner = CliRunner()
SCENARIO = Path(perfcast.__file__).parent / "suite" / "data" / "scenarios" / "01-t1_1.yaml"

CASES = {
    "models": ["models"],
    "hardware list": ["hardware", "list"],
    "infer": ["infer", "--model", "llama-2-7b", "--gpu", "h100-sxm"],
    "serve": ["serve", "--gpu", "h100-sxm", "--qps", "5", "--num-requests", "20"],
    "validate collectives": ["validate", "collectives", "--split", "fit"],
    "run": ["run", str(SCENARIO)],
}


@pytest.fixture(scope="module")
def outputs() -> dict[tuple[str, str], object]:
    """(case, format) -> the CliRunner result, each command run once per format."""
    results = {}
    for case, args in CASES.items():
        for fmt in ("table", "csv", "md", "json"):
            results[case, fmt] = runner.invoke(app, [*args, "--format", fmt])
        results[case, "--json"] = runner.invoke(app, [*args, "--json"])
    for (case, fmt), res in results.items():
        assert res.exit_code == 0, (case, fmt, res.output)
        assert "…" not in res.output, (case, fmt)
    return results


def csv_tables(text: str) -> list[list[list[str]]]:
    """CSV output as tables (lists of records): '#' lines dropped, blank lines between."""
    body = "".join(line for line in io.StringIO(text) if not line.startswith("#"))
    tables: list[list[list[str]]] = [[]]
    for record in csv.reader(io.StringIO(body)):
        if record:
            tables[-1].append(record)
        elif tables[-1]:
            tables.append([])
    return [t for t in tables if t]


def md_cells(line: str) -> list[str]:
    """A pipe-table row's cells, split on unescaped pipes, escapes ('\\|', '\\\\') undone and
    <br> read as a line break."""
    cells, cell, chars = [], "", iter(line.strip())
    for ch in chars:
        if ch == "\\":
            cell += next(chars, "")
        elif ch == "|":
            cells.append(cell)
            cell = ""
        else:
            cell += ch
    cells.append(cell)
    assert cells[0] == "" and cells[-1] == "", line  # '| a | b |'
    return [c.removeprefix(" ").removesuffix(" ").replace("<br>", "\n") for c in cells[1:-1]]


def md_tables(text: str) -> list[list[list[str]]]:
    """Markdown output's pipe tables as rows of cells, the separator row checked."""
    tables, current = [], []
    for line in [*text.split("\n"), ""]:
        if line.startswith("|"):
            current.append(md_cells(line))
        elif current:
            header, rule, *rows = current
            assert all(c in ("---", "---:") for c in rule), rule
            assert {len(r) for r in rows} <= {len(header)} and len(rule) == len(header)
            tables.append([header, *rows])
            current = []
    return tables


@pytest.mark.parametrize("case", CASES)
def test_csv_is_every_table_with_its_headers_and_nothing_else(outputs, case):
    tables = csv_tables(outputs[case, "csv"].stdout)
    titles = [line for line in outputs[case, "csv"].stdout.splitlines() if line.startswith("# ")]
    assert tables and len(titles) == len(tables)
    md = md_tables(outputs[case, "md"].stdout)
    assert [t[0] for t in tables] == [t[0] for t in md]  # the same headers
    for table in tables:
        assert len({len(record) for record in table}) == 1, table[0]  # equal widths
        for header in table[0]:
            assert header in outputs[case, "table"].stdout  # the table's own headers


@pytest.mark.parametrize("case", CASES)
def test_md_is_pipe_tables_under_their_titles(outputs, case):
    text = outputs[case, "md"].stdout
    tables = md_tables(text)
    assert tables
    assert text.count("\n### ") + text.startswith("### ") >= len(tables) - 1
    assert csv_tables(outputs[case, "csv"].stdout) == tables


def _untimed(value):
    """A payload without its wall-clock times (`run` reports how long each variant took)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k != "wall_s"}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


@pytest.mark.parametrize("case", CASES)
def test_format_json_is_json(outputs, case):
    printed = json.loads(outputs[case, "json"].stdout)
    assert _untimed(printed) == _untimed(json.loads(outputs[case, "--json"].stdout))
    assert outputs[case, "json"].stdout == json.dumps(printed, indent=2) + "\n"


def test_csv_values_are_the_catalogs_in_full(outputs):
    (table,) = csv_tables(outputs["models", "csv"].stdout)
    rows = json.loads(outputs["models", "json"].stdout)["models"]
    assert table[0] == list(rows[0])
    assert table[1:] == [[str(v) for v in row.values()] for row in rows]


def test_csv_sends_notes_to_stderr(outputs):
    res = outputs["hardware list", "csv"]
    assert "Cluster presets:" in res.stderr and "Cluster presets:" not in res.stdout
    assert "Cluster presets:" in outputs["hardware list", "md"].stdout


@pytest.mark.parametrize("args", [["--json", "--format", "csv"], ["--format", "md", "--json"],
                                  ["--json", "--format", "table"]])
def test_json_with_another_format_is_refused_naming_both(args):
    res = runner.invoke(app, ["models", *args])
    assert res.exit_code == 2
    assert "--json" in res.stderr and "--format" in res.stderr
    assert res.stdout == ""


def test_json_and_format_json_agree():
    res = runner.invoke(app, ["models", "--json", "--format", "json"])
    assert res.exit_code == 0
    assert res.stdout == runner.invoke(app, ["models", "--json"]).stdout


def test_unknown_format_is_refused():
    res = runner.invoke(app, ["infer", "--model", "llama-2-7b", "--format", "xml"])
    assert res.exit_code == 2
    assert res.stderr.startswith("error: format: unknown format 'xml'")
    assert "table, json, csv, md" in res.stderr


def test_query_csv_and_format_are_refused_together(tmp_path):
    res = runner.invoke(app, ["query", str(tmp_path), "--csv", "--format", "md"])
    assert res.exit_code == 2
    assert "--csv" in res.stderr and "--format" in res.stderr


def _printed(fmt: str, headers: list[str], rows: list[list[str]]) -> str:
    table = Table(title="a, b: c")
    for header in headers:
        table.add_column(Text(header))
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), tables_as(fmt):
        new_console().print(table)
    return out.getvalue()


# Cells of any text, with what CSV quotes, Markdown escapes and Rich reads as markup.
CELL = st.lists(st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")),
                        max_size=4)
                | st.sampled_from([",", '"', "|", "\\", "\n", "[b]", "#", " "]),
                max_size=4).map("".join)


@st.composite
def tables(draw):
    width = draw(st.integers(1, 4))
    headers = draw(st.lists(CELL, min_size=width, max_size=width))
    rows = draw(st.lists(st.lists(CELL, min_size=width, max_size=width), max_size=4))
    return headers, rows


@settings(max_examples=60, deadline=None)
@given(tables())
def test_any_table_round_trips_through_csv_and_keeps_its_shape_in_md(table):
    headers, rows = table
    text = _printed("csv", headers, rows)
    assert text.startswith("# a, b: c\n")
    assert list(csv.reader(io.StringIO(text.split("\n", 1)[1]))) == [headers, *rows]
    (md,) = md_tables(_printed("md", headers, rows))
    assert len(md) == 1 + len(rows) and {len(r) for r in md} == {len(headers)}
