"""`perfcast sweep`, `perfcast query` and `perfcast capacity`: design-space search.

`sweep` runs a command over a grid of its options (resumable, Parquet results), `query` runs
DuckDB SQL over those results, `capacity` finds the cheapest serving deployment meeting
latency SLOs (scenario X15). The sweep engine lives in `perfcast.sweep`; this module gives it
the point function of `perfcast.sweep._point` (the point's request through `perfcast.api.run`:
the payload `perfcast <command> --json` prints). Capacity is a request of its own.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from perfcast import __version__
from perfcast.api import COMMAND_NAMES, command_for
from perfcast.cli._common import (
    FormatOption,
    JsonOption,
    answer,
    emit,
    guarded,
    output_format,
)
from perfcast.cli._console import Table, new_console
from perfcast.cli._progress import interrupted, progress_bar
from perfcast.errors import InputError, close_matches
from perfcast.sweep._point import run_point

if TYPE_CHECKING:  # the sweep engine and pandas load when a command runs, not for --help
    import pandas as pd

    from perfcast.api import CapacityResult

__all__ = ["capacity", "query", "run_point", "sweep"]

# Payload metrics a sweep's table shows by default, per command (others: the first numbers).
DEFAULT_METRICS = {
    "infer": ["ttft_s", "tpot_s", "e2e_s", "throughput_tok_s"],
    "serve": ["ttft_s.p99", "tpot_s.p99", "e2e_s.p99", "throughput_tok_s"],
    "step": ["time_s"],
    "train": ["iteration_time_s", "tokens_per_s", "mfu", "memory_per_gpu_bytes"],
    "collective": ["time_s", "busbw_gbps"],
    "accel": ["cycles", "energy_j", "utilization"],
}
SHOWN_ROWS = 40


def _check_names(command: str, options: dict[str, Any], field: str) -> None:
    request = command_for(command).request
    for name in options:
        request.check_option(name, f"{field}.{name}")


def _scenario_base(scenario: Path | None, command: str | None, variant: str | None
                   ) -> tuple[str, dict[str, Any]]:
    """The command and base options: a scenario file's (one of its variants'), or --command
    with none."""
    if scenario is not None and command is not None:
        raise InputError("command", "give a scenario file or --command, not both",
                         "FILE.yaml or --command NAME")
    if scenario is None:
        if command is None:
            raise InputError("command", "give a scenario file or --command", sorted(COMMAND_NAMES))
        return command, {}
    try:
        from perfcast.suite import load_scenario
    except ImportError:
        raise InputError("scenario", "scenario files need perfcast.suite, which this install "
                         "lacks", "--command NAME with --set NAME=VALUE") from None
    loaded = load_scenario(scenario)
    return loaded.command, dict(loaded.options_for(variant))


def sweep_points(scenario: Path | None, command: str | None, sets: list[str],
                 grids: list[str], variant: str | None = None
                 ) -> tuple[str, list[dict[str, Any]], list[str]]:
    """(command, the points, the swept option names) from the command line's pieces."""
    from perfcast.sweep import expand_grid, parse_assignment

    if variant is not None and scenario is None:
        raise InputError("variant", "a variant needs a scenario file", "FILE.yaml --variant")
    command, base = _scenario_base(scenario, command, variant)
    base.update(parse_assignment(text, "set", many=False) for text in sets)
    grid = dict(parse_assignment(text, "grid", many=True) for text in grids)
    _check_names(command, base, "set")
    _check_names(command, grid, "grid")
    return command, expand_grid({"command": command, **base}, grid), list(grid)


def _metric_columns(frame: pd.DataFrame, command: str, metrics: str | None) -> list[str]:
    import pandas as pd

    if metrics:
        wanted = [f"out.{m.strip()}" for m in metrics.split(",") if m.strip()]
        missing = [m for m in wanted if m not in frame.columns and (frame.status == "ok").any()]
        if missing:
            outs = [c.removeprefix("out.") for c in frame.columns if c.startswith("out.")]
            hint = close_matches(missing[0].removeprefix("out."), outs)
            raise InputError("metrics", f"no metric {missing[0].removeprefix('out.')!r}" + (
                f"; did you mean {hint[0]}?" if hint else ""), "dotted payload paths")
        return [c for c in wanted if c in frame.columns]
    preferred = [f"out.{m}" for m in DEFAULT_METRICS.get(command, [])]
    shown = [c for c in preferred if c in frame.columns]
    if shown:
        return shown
    numeric = [c for c in frame.columns if c.startswith("out.") and not
               c.startswith("out.inputs.") and pd.api.types.is_numeric_dtype(frame[c])]
    return numeric[:4]


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts: Python scalars, missing values as None."""
    plain = frame.astype(object).where(frame.notna(), None)
    return plain.to_dict("records")


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _print_frame(frame: pd.DataFrame, title: str, limit: int | None = None) -> None:
    table = Table(title=title)
    for column in frame.columns:
        table.add_column(str(column), overflow="fold")
    shown = frame if limit is None else frame.head(limit)
    for row in shown.itertuples(index=False):
        table.add_row(*(_cell(v) for v in row))
    console = new_console()
    console.print(table)
    if limit is not None and len(frame) > limit:
        console.print(f"... {len(frame) - limit} more rows; see them with `perfcast query`")


def _run_points(points: list[dict[str, Any]], out: Path, backend: str, workers: int | None,
                show: bool) -> pd.DataFrame:
    """`run_sweep` with the CLI's progress bar (when `show` and stderr is a terminal); on
    Ctrl-C, how many points are kept in `out` (the finished ones are, in parts/)."""
    from perfcast.sweep import point_key, run_sweep
    from perfcast.sweep._store import read_parts

    try:
        with progress_bar("sweep", quiet=not show) as bar:
            return run_sweep(points, run_point, out, backend=backend, workers=workers,
                             progress=bar)
    except KeyboardInterrupt:
        keys = {point_key(point) for point in points}
        saved = len(keys & set(read_parts(out)))
        interrupted(f"{saved} of {len(keys)} points saved in {out}/; rerun the same command "
                    "to resume")
        raise


@guarded
def sweep(
    scenario: Annotated[Path | None, typer.Argument(
        help="Scenario YAML: its command and options are the base the grid varies.")] = None,
    command: Annotated[str | None, typer.Option(
        help="The command to sweep when no scenario is given: " + ", ".join(COMMAND_NAMES))] = None,
    variant: Annotated[str | None, typer.Option(
        help="The scenario variant whose options are the base.")] = None,
    sets: Annotated[list[str] | None, typer.Option(
        "--set", help="A fixed option, NAME=VALUE (repeatable).")] = None,
    grids: Annotated[list[str] | None, typer.Option(
        "--grid", help="A swept option, NAME=V1,V2,... (repeatable: the cartesian product; "
        "';' separates values that hold commas).")] = None,
    out: Annotated[Path, typer.Option(
        help="Result directory: parts/ while running, then results.parquet. Run again to "
             "resume: finished points are not recomputed.")] = ...,
    workers: Annotated[int | None, typer.Option(
        help="Worker processes (default: the CPU count; 1 runs in this process).")] = None,
    ray: Annotated[bool, typer.Option(
        "--ray", help="Run on Ray: the cluster at RAY_ADDRESS (also used when only that is "
        "set), else a local Ray instance. Needs perfcast\\[ray].")] = False,
    metrics: Annotated[str | None, typer.Option(
        help="Payload metrics to show, comma-separated dotted paths (e.g. ttft_s.p99).")
                       ] = None,
    progress: Annotated[bool, typer.Option(help="Progress bar on stderr.")] = True,
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """Run a command over a grid of options; results to Parquet (query with `perfcast query`)."""
    from perfcast.sweep import choose_backend

    fmt = output_format(json_out, format_out)
    command, points, swept = sweep_points(scenario, command, sets or [], grids or [], variant)
    frame = _run_points(points, out, choose_backend(ray), workers, progress and fmt != "json")
    ok = int((frame.status == "ok").sum())
    shown = [*(f"in.{n}" for n in swept), "status", *_metric_columns(frame, command, metrics),
             *(["error"] if ok < len(frame) else [])]
    summary = {"points": len(frame), "ok": ok, "errors": len(frame) - ok,
               "computed": frame.attrs["computed"], "reused": frame.attrs["reused"]}
    emit(fmt, lambda: {"perfcast_version": __version__, "command": command,
                       "results": frame.attrs["path"], **summary,
                       "rows": _records(frame[["key", *shown]])},
         lambda: _print_sweep(frame, shown, command, summary))


def _print_sweep(frame: pd.DataFrame, shown: list[str], command: str, summary: dict) -> None:
    _print_frame(frame[shown], f"perfcast {command} sweep", SHOWN_ROWS)
    console = new_console()
    console.print(", ".join(f"{k} {v}" for k, v in summary.items()))
    console.print(f"results: {frame.attrs['path']}")


def _parquet_source(source: Path) -> str:
    """The Parquet path (or glob, for an unfinished sweep's parts) behind `source`."""
    from perfcast.sweep import PARTS_DIR, RESULTS_FILE

    if source.is_dir():
        if (source / RESULTS_FILE).is_file():
            return str(source / RESULTS_FILE)
        if any((source / PARTS_DIR).glob("part-*.parquet")):
            return str(source / PARTS_DIR / "part-*.parquet")
        raise InputError("source", f"{source} holds no sweep results",
                         f"a sweep directory ({RESULTS_FILE} or {PARTS_DIR}/) or .parquet file")
    if source.suffix != ".parquet" or not source.is_file():
        raise InputError("source", f"{source} is not a Parquet file or sweep directory",
                         "a sweep directory or .parquet file")
    return str(source)


def run_query(source: Path, sql: str) -> pd.DataFrame:
    """DuckDB SQL over a sweep's results, which it sees as the table `results`."""
    import duckdb  # here, not at module level: it is only needed by `perfcast query`

    literal = "'" + _parquet_source(source).replace("'", "''") + "'"
    with duckdb.connect() as con:
        con.execute(f"CREATE VIEW results AS SELECT * FROM read_parquet({literal}, "
                    "union_by_name = true)")
        try:
            return con.execute(sql).df()
        except duckdb.Error as exc:
            raise InputError("sql", str(exc).splitlines()[0],
                             'DuckDB SQL over `results`, e.g. SELECT "in.tp" FROM results'
                             ) from None


@guarded
def query(
    source: Annotated[Path, typer.Argument(help="A sweep directory or a Parquet file.")],
    sql: Annotated[str, typer.Argument(
        help='SQL over the table `results`; quote dotted columns: SELECT "in.tp", '
             '"out.ttft_s" FROM results ORDER BY 2')] = "SELECT * FROM results",
    json_out: JsonOption = False,
    format_out: FormatOption = None,
    csv_out: Annotated[bool, typer.Option(
        "--csv", help="Print the rows as CSV, values unformatted.")] = False,
) -> None:
    """DuckDB SQL over sweep results (the table is `results`)."""
    fmt = output_format(json_out, format_out)
    if csv_out and (json_out or format_out is not None):
        raise InputError("csv", f"--csv and {'--json' if json_out else '--format'} both given",
                         "one of them")
    frame = run_query(source, sql)
    if csv_out:
        frame.to_csv(sys.stdout, index=False)
        return
    emit(fmt, lambda: {"columns": [str(c) for c in frame.columns], "rows": _records(frame)},
         lambda: _print_frame(frame, f"{len(frame)} rows"))


def _print_capacity(capacity: CapacityResult) -> None:
    result = capacity.payload()
    front = {i: [] for i in range(len(result["candidates"]))}
    for latency, indices in result["pareto"].items():
        for i in indices:
            front[i].append(latency)
    table = Table(title=f"capacity at {result['target_qps']:g} req/s: P99 TTFT <= "
                  f"{result['slo']['ttft_p99_s']:g} s, P99 TPOT <= "
                  f"{result['slo']['tpot_p99_s']:g} s")
    for name in ("gpu", "tp", "status", "max req/s per replica", "replicas", "GPUs", "$/h",
                 "$/M output tok", "P99 TTFT s", "P99 TPOT s", "Pareto"):
        table.add_column(name)
    for i, row in enumerate(result["candidates"]):
        ok = row["status"] == "ok"
        cap = ">=" if ok and row["max_qps_capped"] else ""
        table.add_row(row["gpu"], str(row["tp"]), row["status"],
                      f"{cap}{row['max_qps_per_replica']:.3g}" if ok else "-",
                      *(_cell(row.get(k)) for k in ("replicas", "gpus", "usd_per_hour",
                                                      "usd_per_million_output_tokens",
                                                      "ttft_p99_s", "tpot_p99_s")),
                      ",".join(front[i]) or "")
    console = new_console()
    console.print(table)
    for row in result["candidates"]:
        if row["status"] != "ok":
            console.print(f"{row['gpu']} TP{row['tp']}: {row['status']}: {row['reason']}")
    best = result["chosen"]
    if best is None:
        console.print("no candidate meets the SLOs")
    else:
        console.print(f"chosen: {best['replicas']} x TP{best['tp']} on {best['gpu']} "
                      f"({best['gpus']} GPUs): ${best['usd_per_hour']:.2f}/h, "
                      f"${best['usd_per_million_output_tokens']:.2f} per million output tokens")
    for gpu, price in result["prices"].items():
        console.print(f"price {gpu}: ${price['usd_per_gpu_hour']:g}/GPU-h ({price['source']}, "
                      f"as of {price['as_of']})")


@guarded
def capacity(
    model: Annotated[str, typer.Option(help="Catalog model name or HF id.")] = "llama-3-70b",
    qps: Annotated[float, typer.Option(help="Target arrival rate, requests/s.")] = 10.0,
    ttft_p99_slo: Annotated[str, typer.Option(
        help="P99 TTFT limit: 1s, 800ms (a bare number is seconds).")] = 1.0,
    tpot_p99_slo: Annotated[str, typer.Option(
        help="P99 TPOT limit: 50ms, 0.05s (a bare number is seconds).")] = 0.05,
    gpu: Annotated[str, typer.Option(help="Candidate GPUs, comma-separated catalog names.")
                   ] = "h100-sxm,a100-sxm4-80gb",
    tp: Annotated[str, typer.Option(help="Candidate TP degrees per replica.")] = "2,4,8",
    prices: Annotated[Path | None, typer.Option(
        help="JSON price file overriding the shipped list prices per GPU "
             '({"h100-sxm": {"usd_per_gpu_hour": 2.5, "source": "...", "as_of": "..."}}).')
                      ] = None,
    num_requests: Annotated[int, typer.Option(
        help="Requests per probe simulation (fixed, like the seed: deterministic).")] = 100,
    seed: Annotated[int, typer.Option(help="Workload seed of every probe.")] = 0,
    qps_step: Annotated[float, typer.Option(
        help="Relative resolution of the max-QPS bisection (0.05: rates 5% apart).")] = 0.05,
    set: Annotated[list[str] | None, typer.Option(
        "--set", help="Another `perfcast serve` option for every probe, NAME=VALUE "
        "(e.g. lengths=trace, trace=arxiv, scheduler=sarathi).")] = None,
    workers: Annotated[int | None, typer.Option(
        help="Worker processes (default: the CPU count; 1 runs in this process).")] = None,
    ray: Annotated[bool, typer.Option("--ray", help="Run the candidates on Ray.")] = False,
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """Cheapest GPU type x TP x replicas meeting P99 TTFT/TPOT SLOs at a target QPS (X15)."""
    answer(command_for("capacity").request, locals(), _print_capacity,  # its module: to run
           progress="capacity: candidates")
