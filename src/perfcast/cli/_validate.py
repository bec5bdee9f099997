"""`perfcast validate`: accuracy against real measurements, each check beside its baselines.

The checks live in `perfcast.validate` (`*_report` functions returning a ValidationReport);
each command here parses its flags, calls one and prints its tables or its JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from perfcast.cli._common import FormatOption, JsonOption, emit, guarded, output_format
from perfcast.cli._console import Table, new_console, rule
from perfcast.cli._progress import (
    INTERRUPTED_EXIT,
    ProgressFn,
    interrupted,
    progress_bar,
    progress_stage,
)
from perfcast.validate import KERNEL_CHECK_SPLITS

if TYPE_CHECKING:  # a check's data and models load when it runs, not for --help
    from perfcast.validate import ValidationReport

validate_app = typer.Typer(help="Accuracy against real measurements.", no_args_is_help=True)
KERNEL_METHODS = ("roofline", "cross_generation", "learned", "target_measured",
                  "learned_target")
NO_REPORTS = ("training",)  # checks `validate all` runs without an --out sub-folder


def _emit(report: ValidationReport, fmt: str, printer) -> None:
    """The report's payload as JSON, or the command's tables (on stdout) in `fmt`."""
    emit(fmt, report.payload, lambda: printer(report, new_console()))


@contextmanager
def _interruptible(out: Path | None) -> Iterator[None]:
    """Ctrl-C during a check given --out: say that nothing was written there (a check
    writes its reports when it finishes) and exit 130; without --out, Ctrl-C as usual."""
    try:
        yield
    except KeyboardInterrupt:
        if out is None:
            raise
        interrupted(f"nothing written to {out}/ (a check writes its reports when it "
                    "finishes); rerun the same command")


@contextmanager
def _running(label: str, out: Path | None, quiet: bool) -> Iterator[ProgressFn | None]:
    """Around one check: its progress bar (None when `quiet`, i.e. JSON, or off a terminal)
    and what Ctrl-C says (`_interruptible`)."""
    with _interruptible(out), progress_bar(label, quiet) as bar:
        yield bar


def _pct(fraction: float) -> str:
    """An error fraction as a percent (0.0881 -> 8.8%); '-' where there is none."""
    return "-" if fraction != fraction else f"{fraction:.1%}"


def _method_table(rows, index: list[str], value: str, label: str, title: str) -> Table:
    """`rows` pivoted to one column per method, headed '<method> <label>', the fraction
    `value` (mape, median_ape) shown as a percent."""
    wide = rows.pivot_table(index=index, columns="method", values=value)
    table = Table(title=title)
    for col in index:
        table.add_column(col, justify="right" if col == "n" else "left")
    for method in wide.columns:
        table.add_column(f"{method} {label}", justify="right")
    for key, r in wide.iterrows():
        cells = key if isinstance(key, tuple) else (key,)
        table.add_row(*(str(c) for c in cells), *(_pct(v) for v in r))
    return table


def _table(rows, title: str) -> Table:
    table = Table(title=title)
    for col in ("split", "device", "group", "n", *(f"{m} MAPE" for m in KERNEL_METHODS)):
        table.add_column(col, justify="right" if col not in ("split", "device", "group")
                         else "left")
    wide = rows.pivot_table(index=["split", "device", "group"], columns="method",
                            values="mape").reset_index()
    counts = rows.groupby(["split", "device", "group"])["n"].max()
    for r in wide.itertuples(index=False):
        d = r._asdict()
        table.add_row(d["split"], d["device"], d["group"], str(counts[(d["split"], d["device"],
                                                                        d["group"])]),
                      *(_pct(d.get(m, float("nan"))) for m in KERNEL_METHODS))
    return table


@validate_app.command("kernels")
@guarded
def kernels(
    split: Annotated[list[str] | None, typer.Option(
        help=f"Splits to run: {', '.join(KERNEL_CHECK_SPLITS)}.")] = None,
    quick: Annotated[bool, typer.Option(help="Subsample rows (a CI-sized run).")] = False,
    train_rows: Annotated[int | None, typer.Option(
        help="Fit rows per device x family x dtype (default 2000; --quick 400).")] = None,
    test_rows: Annotated[int | None, typer.Option(
        help="Test rows per device x family x dtype (default all; --quick 300).")] = None,
    out: Annotated[Path | None, typer.Option(help="Directory for kernels.md / kernels.csv.")
                   ] = None,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 0,
    by: Annotated[str, typer.Option(help="Groups: family (plus attn_*/mla), or dtype: also "
                                         "<family>/<dtype scheme> (gemm/fp8, gemm/w-int4, "
                                         "attn_decode/bf16/kv-fp8, ...) and "
                                         "moe/<routing distribution>; or stack: each "
                                         "framework's kernel tables (trtllm, vllm, sglang), "
                                         "one device left out at a time.")] = "family",
    learned: Annotated[bool, typer.Option(
        help="Also fit and score the learned kernel model (learned, learned_target; "
             "interval coverage).")] = True,
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """Per device x family MAPE and P90 APE: plain roofline, cross-generation, target-measured
    (physical and learned kernel models)."""
    from perfcast.validate import kernels_report

    fmt = output_format(json_out, format_out)
    with _running("kernels: held-out devices", out, fmt == "json") as bar:
        report = kernels_report(split, quick, train_rows, test_rows, out, seed, by,
                                progress=bar, learned=learned)
    _emit(report, fmt, _print_kernels)


def _print_kernels(report: ValidationReport, out: Console) -> None:
    from perfcast.validate import TARGETS

    if report.extras.get("by") == "stack":
        _print_stack_kernels(report, out)
        return
    out.print(_table(report.rows, "Per-kernel MAPE on held-out devices"))
    summary = Table(title="Summary over kernel families (sub-groups left out)")
    for col in ("split", "method", "median family MAPE", "pooled MAPE", "90% coverage",
                "extrapolated"):
        summary.add_column(col, justify="left" if col in ("split", "method") else "right")
    for r in report.extras["summary"].itertuples(index=False):
        d = r._asdict()
        summary.add_row(r.split, r.method, _pct(r.median_family_mape), _pct(r.pooled_mape),
                        _pct(d.get("coverage_90", float("nan"))),
                        _pct(d.get("extrapolated", float("nan"))))
    out.print(summary)
    out.print(f"targets: cross-generation median family MAPE <= "
              f"{TARGETS['cross_generation_median_mape']:.0%}, target-measured MAPE <= "
              f"{TARGETS['target_measured_mape']:.0%}")


def _print_stack_kernels(report: ValidationReport, out: Console) -> None:
    """--by stack: per stack x family x method, median over held-out devices."""
    summary = report.extras["summary"]
    table = Table(title="Per-framework kernel tables, one device left out: median over "
                        "held-out devices")
    for col in ("stack", "group", "method", "devices", "MAPE", "median APE", "90% coverage"):
        table.add_column(col, justify="left" if col in ("stack", "group", "method")
                         else "right")
    for r in summary.itertuples(index=False):
        table.add_row(r.stack, r.group, r.method, str(r.devices), _pct(r.mape),
                      _pct(r.median_ape), _pct(r._asdict().get("coverage_90", float("nan"))))
    out.print(table)
    out.print(f"target (issue 17): median MAPE <= {report.extras['target_mape']:.0%} per "
              "family on the vllm and sglang tables; before = the shipped default "
              "calibration without the held-out device's own corrections")


@validate_app.command("calibration")
@guarded
def calibration_cmd(
    quick: Annotated[bool, typer.Option(
        help="A CI-sized run: a few devices, rows capped per family x dtype.")] = False,
    source: Annotated[str, typer.Option(
        help="Measurement store: default (kernels.parquet), vllm, sglang, or all.")
                      ] = "default",
    out: Annotated[Path | None, typer.Option(
        help="Directory for calibration.md / calibration.csv.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the 10% sample and the fits' rows.")] = 0,
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """Per device x family: a calibration fitted on 10% of the device's rows (as `perfcast
    calibrate` fits it) against no calibration, on the other 90%, beside the roofline."""
    from perfcast.validate import calibration_report

    fmt = output_format(json_out, format_out)
    with _running("calibration: held-out devices", out, fmt == "json") as bar:
        report = calibration_report(quick, source, out, seed, progress=bar)
    _emit(report, fmt, _print_calibration)


def _print_calibration(report: ValidationReport, out: Console) -> None:
    rows = report.rows
    table = Table(title="Calibrated on 10% of the device's rows vs uncalibrated, MAPE on "
                        "the other 90% (per family)")
    methods = ("roofline", "uncalibrated", "unchecked", "calibrated")
    for col in ("source", "device", "family", "sampled", "n", *methods, "status", "verdict"):
        table.add_column(col, justify="right" if col in ("sampled", "n", *methods)
                         else "left")
    for r in rows[~rows["group"].str.contains("/", regex=False)].itertuples(index=False):
        d = r._asdict()
        table.add_row(r.source, r.device, r.group, str(r.sampled), str(r.n),
                      *(_pct(d[f"{m}_mape"]) for m in methods), r.status, r.verdict)
    out.print(table)
    summary = Table(title="(device, group) pairs: calibrated better / tie (kept) / worse "
                          "than uncalibrated")
    for col in ("source", "level", "devices", "pairs", "better", "tie", "worse"):
        summary.add_column(col, justify="left" if col in ("source", "level") else "right")
    for r in report.extras["summary"].itertuples(index=False):
        summary.add_row(r.source, r.level, *(str(v) for v in (r.devices, r.pairs, r.better,
                                                              r.tie, r.worse)))
    out.print(summary)


def _models_table(rows) -> Table:
    e2e = rows[rows["split"] == "models"]
    tiers = [m for m in ("target_measured", "cross_generation") if m in set(e2e["method"])]
    learned = ["learned"] if "learned" in set(e2e["method"]) else []
    methods = ["roofline", "sum_of_kernels", "sum_of_measured_ops", *tiers, *learned]
    wide = e2e.pivot_table(index=["device", "group"], columns="method", values="mape")
    covers = {label: e2e[e2e["method"].isin(which)].dropna(subset=["coverage_90"])
              .set_index(["device", "group"])["coverage_90"]
              for label, which in (("90% coverage", tiers), ("learned coverage", learned))
              if which}
    counts = e2e.groupby(["device", "group"])["n"].max()
    table = Table(title="Whole-model MAPE per device (NeuSight FP32 eager labels)")
    for col in ("device", "group", "n", *methods, *covers):
        table.add_column(col, justify="left" if col in ("device", "group") else "right")
    for (device, group), r in wide.iterrows():
        cells = [f"{r[m]:.1%}" if m in r and r[m] == r[m] else "-" for m in methods]
        table.add_row(device, group, str(counts[(device, group)]), *cells,
                      *(f"{c.get((device, group), float('nan')):.0%}" for c in covers.values()))
    return table


@validate_app.command("models")
@guarded
def models_cmd(
    out: Annotated[Path | None, typer.Option(help="Directory for models.md / models.csv.")
                   ] = None,
    per_op: Annotated[bool, typer.Option(help="Also check kernel families inside a layer.")
                      ] = True,
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """Whole-model forecasts against measured model times, beside the baselines."""
    from perfcast.validate import models_report

    fmt = output_format(json_out, format_out)
    with _running("models: configurations", out, fmt == "json") as bar:
        report = models_report(out, per_op, progress=bar)
    _emit(report, fmt, _print_models)


def _print_models(report: ValidationReport, out: Console) -> None:
    from perfcast.validate import MODEL_TARGET_MAPE

    rows = report.rows
    out.print(_models_table(rows))
    op = rows[rows["split"] == "per_op"]
    if not op.empty:
        out.print(_method_table(op, ["group"], "mape", "MAPE", "Per-op MAPE: kernel families "
                                "in one layer, mean over devices"))
    out.print(f"target: <= {MODEL_TARGET_MAPE:.0%} MAPE on every device")


@validate_app.command("serving")
@guarded
def serving_cmd(
    method: Annotated[list[str] | None, typer.Option(
        help="perfcast (the serve engine, closed loop), sum_of_kernels or roofline "
             "(one-step analytic baselines).")] = None,
    points_per_group: Annotated[int | None, typer.Option(
        help="Sample this many points per model x device x backend x precision.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the per-group sample.")] = 0,
    arch: Annotated[str, typer.Option(help="dense, moe or all points.")] = "all",
    mode: Annotated[str, typer.Option(
        help="agg (aggregated serving points) or disagg (prefill/decode pools; methods "
             "perfcast and roofline, both simulated).")] = "agg",
    by: Annotated[str, typer.Option(
        help="Group errors by model, by technique (dense/moe x precision x disagg), or by "
             "backend (trtllm, vllm, sglang: each over every device and model).")
                  ] = "model",
    stack: Annotated[str | None, typer.Option(
        help="Kernel tables pricing the points: 'backend' (each point its own framework's "
             "stack: trtllm, vllm, sglang) or a stack's name (perfcast stacks) for every "
             "point; default: the shipped calibration (= the trtllm stack).")] = None,
    exclude_seed: Annotated[int | None, typer.Option(
        help="Leave out the points the sample of this seed picks (a held-out check of "
             "choices made while looking at that sample).")] = None,
    out: Annotated[Path | None, typer.Option(help="Directory for serving.md / serving.csv.")
                   ] = None,
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """Median and P90 APE of TTFT and of TPOT against measured serving benchmarks."""
    from perfcast.validate import serving_report

    fmt = output_format(json_out, format_out)
    with _running(f"serving ({mode}): points", out, fmt == "json") as bar:
        report = serving_report(method, points_per_group, seed, arch, mode, by, exclude_seed,
                                out, progress=bar, stack=stack)
    _emit(report, fmt, _print_serving)


def _backend_table(rows, stack: str | None) -> Table:
    """--by backend: per backend and metric, n (per method, in order, where methods refused
    different points) and each method's median APE, MAPE, P90."""
    priced = "the shipped calibration" if stack is None else f"stack {stack!r}"
    table = Table(title=f"Serving per backend (kernels: {priced}): APE of TTFT and TPOT")
    methods = list(dict.fromkeys(rows["method"]))
    for col in ("backend", "metric", "n"):
        table.add_column(col, justify="right" if col == "n" else "left")
    for m in methods:
        for stat in ("median", "MAPE", "P90"):
            table.add_column(f"{m} {stat}", justify="right")
    for (split, group), part in rows.groupby(["split", "group"], sort=True):
        by_method = part.set_index("method")
        cells = [c for m in methods for c in (
            (_pct(by_method.at[m, "median_ape"]), _pct(by_method.at[m, "mape"]),
             _pct(by_method.at[m, "p90_ape"])) if m in by_method.index else ("-",) * 3)]
        counts = [str(by_method.at[m, "n"]) for m in methods if m in by_method.index]
        n = counts[0] if len(set(counts)) == 1 else "/".join(counts)
        table.add_row(split, group.split("/")[-1], n, *cells)
    return table


def _print_serving(report: ValidationReport, out: Console) -> None:
    from perfcast.validate import SERVING_TARGETS, coverage_lines

    if report.extras.get("by") == "backend":
        out.print(_backend_table(report.rows, report.extras.get("stack")))
    else:
        out.print(_method_table(report.rows, ["split", "device", "group"], "median_ape",
                                "median APE", "Serving: median APE of TTFT and TPOT"))
    out.print("targets (median APE): " + ", ".join(f"{k.upper()} <= {v:.0%}"
                                                   for k, v in SERVING_TARGETS.items()))
    for k in report.extras["skipped"]:
        out.print(f"skipped ({k['method']}) {k['point_id']}: {k['reason']}")
    for line in coverage_lines(report.extras["coverage"]):
        out.print(line)


@validate_app.command("training")
@guarded
def training_cmd(
    method: Annotated[list[str] | None, typer.Option(
        help="roofline (plain roofline + alpha-beta ring: the baseline), sum_of_kernels "
             "(calibrated kernels, default collectives) or perfcast (sum_of_kernels with "
             "training-stack factors fitted held out; held-out splits only).")] = None,
    split: Annotated[list[str] | None, typer.Option(
        help="all, heldout_device (factors fitted on the other GPU generation) or "
             "heldout_model (on every other model); default: all three.")
                     ] = None,
    by: Annotated[str, typer.Option(
        help="Group errors per device, per GPU-count bucket (scale) or per model.")
                  ] = "device",
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """MAPE of tokens/s and MFU against MosaicML's measured MPT training grid (216 runs)."""
    from perfcast.validate import training_report

    fmt = output_format(json_out, format_out)
    with _running("training: points", None, fmt == "json") as bar:
        report = training_report(method, split, by, progress=bar)
    _emit(report, fmt, _print_training)


def _print_training(report: ValidationReport, out: Console) -> None:
    from perfcast.validate import TRAINING_TARGET_MAPE

    out.print(_method_table(report.rows, ["split", "device", "group", "n"], "mape", "MAPE",
                            "Training: MAPE of tokens/s and MFU"))
    overall = report.rows[(report.rows["device"] == "all") & (report.rows["by"] == "metric")
                          & (report.rows["group"] == "tokens_per_s")]
    if not overall.empty:  # --by device: the metric rows are there
        shares = ", ".join(f"{r.split} {r.method} {r.under_predicted:.0%}"
                           for r in overall.itertuples())
        out.print(f"forecast too fast (share of rows, tokens/s): {shares}")
    low, high = report.extras["target_under_predicted"]
    out.print(f"target: MAPE <= {TRAINING_TARGET_MAPE:.0%} (tokens/s and MFU; "
              "mfu in MosaicML's FLOP count, mfu_perfcast in perfcast's), too-fast share "
              f"{low:.0%}-{high:.0%}")


@validate_app.command("collectives")
@guarded
def collectives_cmd(
    split: Annotated[list[str] | None, typer.Option(
        help="fit, held-out:op, held-out:device, held-out:generation, held-out:source, "
             "fit:p2p, held-out:multi-node (default: all).")] = None,
    table7: Annotated[bool, typer.Option(
        "--table7", help="Also the 8-GPU measured-vs-forecast seconds table.")] = False,
    out: Annotated[Path | None, typer.Option(
        help="Directory for collectives.md / collectives.csv.")] = None,
    json_out: JsonOption = False,
    format_out: FormatOption = None,
) -> None:
    """Collective MAPE per split x device x collective/size regime, beside two baselines."""
    from perfcast.validate import collectives_report

    fmt = output_format(json_out, format_out)
    with _running("collectives: splits", out, fmt == "json") as bar:
        report = collectives_report(split, table7, out, progress=bar)
    _emit(report, fmt, _print_collectives)


def _print_collectives(report: ValidationReport, out: Console) -> None:
    out.print(_method_table(report.rows, ["split", "device", "group"], "mape", "MAPE",
                            "Collectives: MAPE per split, device and collective/regime"))
    if "table7" in report.extras:
        out.print(_table7(report.extras["table7"]))
    verdict = report.extras.get("multi_node_verdict")
    if verdict:
        cells = ", ".join(f"{v['regime']} {v['mape']:.1%} ({'met' if v['met'] else 'not met'})"
                          for v in verdict)
        out.print(f"target: 2-node all-reduce (2-16 GPUs pooled, "
                  f"{report.extras['multi_node_method']}) <= "
                  f"{report.extras['multi_node_target_mape']:.0%} MAPE per size regime: {cells}")


def _table7(table) -> Table:
    out = Table(title="8-GPU collectives: measured vs forecast seconds (*: fitted on)")
    for col in ("device", "collective", "bytes", "measured s", "perfcast s", "spec a-b s",
                "APE"):
        out.add_column(col, justify="left" if col in ("device", "collective") else "right")
    for r in table.itertuples(index=False):
        size = next(f"{r.bytes / 2**p:g} {u}" for p, u in ((30, "GiB"), (20, "MiB"),
                                                          (10, "KiB"), (0, "B"))
                    if r.bytes >= 2**p)
        out.add_row(r.device, r.collective + ("*" if r.fitted else ""), size,
                    f"{r.measured_s:.3g}", f"{r.forecast_s:.3g}", f"{r.spec_alphabeta_s:.3g}",
                    f"{r.ape:.1%}")
    return out


@validate_app.command("all")
@guarded
def all_cmd(
    out: Annotated[Path | None, typer.Option(
        help="Directory: one sub-folder of reports per check.")] = None,
    quick: Annotated[bool, typer.Option(
        help="CI-sized samples (kernels subsampled, 1 serving point per group).")] = False,
) -> None:
    """Every accuracy check in turn: kernels, models, serving (aggregated and disaggregated),
    training and collectives, each beside its baseline."""
    from perfcast.validate import check_out_dir

    check_out_dir(out)

    def sub(name: str) -> Path | None:
        return None if out is None else out / name

    finished: list[str] = []
    checks = _all_checks(quick, sub)
    try:
        for i, (name, title, check) in enumerate(checks, start=1):
            rule(title, stderr=True)
            with progress_stage(f"{i}/{len(checks)} "), _reportless(name, out):
                check()
            finished.append(name)
    except typer.Exit as exc:
        if exc.exit_code == INTERRUPTED_EXIT and out is not None and finished:
            typer.echo(f"kept: the finished checks' reports in {out}/: "
                       + ", ".join(n for n in finished if n not in NO_REPORTS), err=True)
        raise


@contextmanager
def _reportless(name: str, out: Path | None) -> Iterator[None]:
    """Ctrl-C in a check `validate all --out` runs without a folder of its own (training):
    `interrupted`, like the others (their `_interruptible` says it for their folder)."""
    try:
        yield
    except KeyboardInterrupt:
        if out is None or name not in NO_REPORTS:
            raise
        interrupted(f"{name} writes no reports; rerun the same command")


def _all_checks(quick: bool, sub) -> list[tuple[str, str, Callable[[], None]]]:
    """(sub-folder, heading, run) of each check `validate all` runs, in order."""
    serving = [(f"serving-{mode}", f"serving ({mode}): TTFT/TPOT against measured serving "
                "benchmarks", partial(serving_cmd, mode=mode,
                                      points_per_group=1 if quick else None,
                                      out=sub(f"serving-{mode}")))
               for mode in ("agg", "disagg")]
    return [("kernels", "kernels: per-kernel MAPE on held-out devices",
             partial(kernels, quick=quick, out=sub("kernels"))),
            ("models", "models: whole-model forecasts against measured model times",
             partial(models_cmd, out=sub("models"))),
            *serving,
            ("training", "training: MPT tokens/s and MFU (llm-foundry)", training_cmd),
            ("collectives", "collectives: NCCL collectives per message-size regime",
             partial(collectives_cmd, out=sub("collectives")))]
