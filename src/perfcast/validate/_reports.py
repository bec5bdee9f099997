"""The `perfcast validate` checks as functions: options checked, the check run, the report
files written, and a `ValidationReport` whose `payload()` is what `--json` prints.

The command line only parses its flags, calls one of these and prints the result; a notebook
or CI job calls the same functions and gets the same rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from perfcast.errors import InputError, check_output_folder, writing
from perfcast.kernels import RooflineModel
from perfcast.measure import load_store
from perfcast.progress import ProgressFn, offset
from perfcast.validate._collectives import (
    COLLECTIVE_SPLITS,
    MULTI_NODE_METHOD,
    MULTI_NODE_TARGET_MAPE,
    collective_table7,
    multi_node_verdict,
    validate_collectives,
)
from perfcast.validate._kernels import (
    LEARNED_ROUNDS,
    STACK_TARGET_MAPE,
    TARGETS,
    stack_markdown,
    summarise,
    summarise_stacks,
    validate_kernels,
    validate_kernels_by_stack,
)
from perfcast.validate._models import MODEL_TARGET_MAPE, validate_models
from perfcast.validate._options import (
    DISAGG_METHODS,
    KERNEL_BY,
    KERNEL_CHECK_SPLITS,
    SERVING_ARCHS,
    SERVING_METHODS,
    TRAINING_BY,
    TRAINING_SPLITS,
)
from perfcast.validate._serving import (
    SERVING_TARGETS,
    analytic_point,
    check_stack,
    load_serving_points,
    sample_serving_points,
    validate_serving,
)
from perfcast.validate._serving_disagg import disagg_point, load_disagg_points
from perfcast.validate._serving_sim import engine_point
from perfcast.validate._silicon import shipped_coverage
from perfcast.validate._training import (
    TRAINING_METHODS,
    TRAINING_TARGET_MAPE,
    TRAINING_TARGET_UNDER,
)
from perfcast.validate._training_calibration import validate_training

__all__ = ["KERNEL_CHECK_SPLITS", "ValidationReport", "check_out_dir", "collectives_report",
           "kernels_report", "models_report", "serving_report", "training_report"]



@dataclass(frozen=True)
class ValidationReport:
    """One accuracy check: its error rows, what `--json` prints beside them (targets,
    summaries, skipped points; tables as records), and its per-configuration forecasts
    where the check has them."""

    rows: pd.DataFrame
    extras: dict[str, Any] = field(default_factory=dict)
    forecasts: pd.DataFrame | None = None

    def payload(self) -> dict[str, Any]:
        return {"rows": self.rows.to_dict("records"),
                **{k: v.to_dict("records") if isinstance(v, pd.DataFrame) else v
                   for k, v in self.extras.items()}}


def check_out_dir(out: Path | None) -> None:
    """--out must be a directory (or not exist yet): nothing the user has is overwritten."""
    check_output_folder(out, "out")


def _check_choices(name: str, values: Iterable[str], allowed, context: str = "") -> None:
    for value in values:
        if value not in allowed:
            raise InputError(name, f"unknown {name} {value!r}{context}", allowed)


def _write(out: Path | None, files: dict[str, pd.DataFrame | Callable[[], str]]) -> None:
    """Write each report file into `out`, if one was given: a table as CSV, else the text
    the callable makes (made only when written)."""
    if out is None:
        return
    with writing(out, "out"):
        out.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            if isinstance(content, pd.DataFrame):
                content.to_csv(out / name, index=False)
            else:
                (out / name).write_text(content())


def md_table(frame: pd.DataFrame) -> str:
    """A DataFrame as a GitHub Markdown table (floats to 4 places)."""
    cols = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame.itertuples(index=False):
        cells = [f"{v:.4f}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _wide(rows: pd.DataFrame) -> pd.DataFrame:
    wide = rows.pivot_table(index=["split", "device", "group", "n"], columns="method",
                            values=["mape", "p90_ape"])
    wide.columns = [f"{method} {stat}" for stat, method in wide.columns]
    return wide.reset_index()


# --- kernels -------------------------------------------------------------------------------

def kernels_report(split: list[str] | None = None, quick: bool = False,
                   train_rows: int | None = None, test_rows: int | None = None,
                   out: Path | None = None, seed: int = 0, by: str = "family",
                   progress: ProgressFn | None = None,
                   learned: bool = True) -> ValidationReport:
    """Per device x family MAPE and P90 APE on held-out kernels (kernels.md / kernels.csv
    into `out`); extras: the summary and the targets. `progress(done, total)` is called
    after each held-out device. `learned`: also fit and score the learned kernel model
    (methods learned, learned_target; --quick with fewer boosting rounds)."""
    chosen = split or ["generation", "neusight"]
    if by not in KERNEL_BY:
        raise InputError("by", f"unknown grouping {by!r}", list(KERNEL_BY))
    _check_choices("split", chosen, KERNEL_CHECK_SPLITS)
    check_out_dir(out)
    for name, value in (("train_rows", train_rows), ("test_rows", test_rows)):
        if value is not None and value < 10:
            raise InputError(name, f"must be >= 10, got {value}", ">= 10")
    if by == "stack":  # per-framework kernel tables, each device left out in turn
        return _stack_report(split, quick, train_rows, test_rows, out, seed, progress, learned)
    train = train_rows or (400 if quick else 2000)
    test = test_rows or (300 if quick else None)
    rows = validate_kernels(load_store(), chosen, train_per_group=train, test_per_group=test,
                            seed=seed, by=by, progress=progress, learned=learned,
                            learned_rounds=LEARNED_ROUNDS["quick" if quick else "full"])
    summary = summarise(rows)
    _write(out, {"kernels.csv": rows, "kernels.md": lambda: _kernels_md(rows, summary)})
    return ValidationReport(rows, {"summary": summary, "targets": TARGETS})


def _stack_report(split: list[str] | None, quick: bool, train_rows: int | None,
                  test_rows: int | None, out: Path | None, seed: int,
                  progress: ProgressFn | None, learned: bool = True) -> ValidationReport:
    """`--by stack` (perfcast.validate._kernels.validate_kernels_by_stack): kernels_stack.csv
    and kernels_stack.md into `out`; extras: the summary over held-out devices, the target."""
    if split:
        raise InputError("split", "--by stack runs its own splits (each framework's devices, "
                         "one left out at a time)", "no --split with --by stack")
    rows = validate_kernels_by_stack(quick=quick, train_per_group=train_rows,
                                     test_per_group=test_rows, seed=seed, progress=progress,
                                     learned=learned)
    summary = summarise_stacks(rows)
    _write(out, {"kernels_stack.csv": rows,
                 "kernels_stack.md": lambda: stack_markdown(rows, summary, md_table)})
    return ValidationReport(rows, {"by": "stack", "summary": summary,
                                   "target_mape": STACK_TARGET_MAPE})


def _kernels_md(rows: pd.DataFrame, summary: pd.DataFrame) -> str:
    sub = rows["group"].str.contains("/", regex=False)
    lines = ["# perfcast validate kernels", "",
             f"Targets: cross-generation median MAPE over families <= "
             f"{TARGETS['cross_generation_median_mape']:.0%} (splits generation, neusight); "
             f"target-measured <= {TARGETS['target_measured_mape']:.0%}.", "",
             "## Summary", "", "Median and pooled over kernel families (moe included; "
             "sub-groups left out, their rows are in their family). learned / "
             "learned_target: the learned kernel model (gradient-boosted trees over physical "
             "features; the physical fit outside their envelope) fitted on the same rows as "
             "cross_generation / target_measured. coverage_90: share of the learned method's "
             "rows priced by the trees whose outcome fell inside the family's conformal 90% "
             "interval, widened by the device's distance from the fitted ones (refits with "
             "device groups left out); extrapolated: share of rows left to the physical fit.",
             "",
             md_table(summary), "",
             "## MAPE and P90 APE per device and family", "", md_table(_wide(rows[~sub])), ""]
    learned = rows[~sub & (rows["method"] == "learned")]
    if not learned.empty:
        lines += ["## Learned model: interval coverage per device and family", "",
                  md_table(learned[["split", "device", "group", "n", "coverage_90",
                                    "extrapolated"]]), ""]
    if sub.any():
        lines += ["## Sub-groups: MLA, quantised dtypes, MoE routing", "",
                  "`<family>/mla`: DeepSeek MLA attention; `<family>/<scheme>`: fp8, fp8_block, "
                  "fp4 (NVFP4), w-int4 / w-int8 (weight-only), int8 (SmoothQuant), `/kv-fp8` "
                  "(FP8 KV cache), `moe/<act>-w-<weights>` (mixed MoE), `moe/<distribution>` "
                  "(routing skew).", "", md_table(_wide(rows[sub])), ""]
    return "\n".join(lines)


# --- models --------------------------------------------------------------------------------

def models_report(out: Path | None = None, per_op: bool = True,
                  progress: ProgressFn | None = None) -> ValidationReport:
    """Whole-model forecasts (`perfcast step`) against measured model times (models.csv,
    model_forecasts.csv, models.md into `out`); extras: the target MAPE. `progress(done,
    total)` is called after each measured configuration."""
    check_out_dir(out)
    rows, forecasts = validate_models(per_op=per_op, progress=progress)
    _write(out, {"models.csv": rows, "model_forecasts.csv": forecasts,
                 "models.md": lambda: _models_md(rows, MODEL_TARGET_MAPE)})
    return ValidationReport(rows, {"target_mape": MODEL_TARGET_MAPE}, forecasts)


def _models_md(rows: pd.DataFrame, target: float) -> str:
    e2e = rows[rows["split"] == "models"]
    wide = e2e.pivot_table(index=["device", "group", "n"], columns="method", values="mape")
    wide = wide.reset_index()
    cover = e2e.dropna(subset=["coverage_90"])[["device", "group", "coverage_90"]]
    op = rows[rows["split"] == "per_op"].pivot_table(index=["device", "group"],
                                                     columns="method", values="mape")
    return "\n".join([
        "# perfcast validate models", "",
        f"Target: <= {target:.0%} MAPE on every device. Labels: NeuSight's measured FP32 "
        "eager PyTorch model times (validate/data/README.md); nothing is fitted to them.", "",
        "## Whole-model MAPE", "", md_table(wide), "",
        "## 90% interval coverage (perfcast tier)", "", md_table(cover), "",
        "## Per-op: kernel families inside one layer (MAPE against the traces)", "",
        md_table(op.reset_index()), ""])


# --- serving -------------------------------------------------------------------------------

def _serving_callable(method: str, mode: str = "agg", stack: str | None = None):
    """agg: the serve engine (perfcast) or one-step analytic baselines; disagg: both pools
    simulated, with perfcast's kernel model or with the plain roofline; kernels per `stack`
    (perfcast.validate._serving.point_stack; the roofline is the same for every stack;
    without one the callables are called as before stacks existed)."""
    priced = {} if stack is None else {"stack": stack}
    if mode == "disagg":
        return {"perfcast": partial(disagg_point, **priced),
                "roofline": partial(disagg_point, time_model=RooflineModel())}[method]
    return {"perfcast": partial(engine_point, **priced),
            "sum_of_kernels": partial(analytic_point, **priced),
            "roofline": partial(analytic_point, time_model=RooflineModel())}[method]


def _check_serving(methods: list[str], mode: str, points_per_group: int | None,
                   out: Path | None, seed: int, exclude_seed: int | None,
                   stack: str | None = None) -> None:
    if mode not in ("agg", "disagg"):
        raise InputError("mode", f"unknown {mode!r}", ("agg", "disagg"))
    check_stack(stack)
    allowed = DISAGG_METHODS if mode == "disagg" else SERVING_METHODS
    _check_choices("method", methods, allowed, f" for --mode {mode}")
    if points_per_group is not None and points_per_group < 1:
        raise InputError("points_per_group", f"must be >= 1, got {points_per_group}", ">= 1")
    check_out_dir(out)
    for name, value in (("seed", seed), ("exclude_seed", exclude_seed)):
        if value is not None and value < 0:
            raise InputError(name, f"must be >= 0, got {value}", ">= 0")


def _serving_points(mode: str, arch: str, points_per_group: int | None, seed: int,
                    exclude_seed: int | None) -> pd.DataFrame:
    """The measured points to check: one architecture, a per-group sample, without the
    points another seed's sample picks (a held-out check)."""
    points = load_disagg_points() if mode == "disagg" else load_serving_points()
    if arch not in SERVING_ARCHS:
        raise InputError("arch", f"unknown {arch!r}", SERVING_ARCHS)
    if arch != "all":
        points = points[points["arch"] == arch]
    if exclude_seed is not None:
        if points_per_group is None:
            raise InputError("exclude_seed", "needs --points-per-group (the sample to leave "
                             "out)", "with --points-per-group")
        seen = sample_serving_points(points, points_per_group, exclude_seed)["point_id"]
        points = points[~points["point_id"].isin(seen)]
    return sample_serving_points(points, points_per_group, seed)


def serving_report(method: list[str] | None = None, points_per_group: int | None = None,
                   seed: int = 0, arch: str = "all", mode: str = "agg", by: str = "model",
                   exclude_seed: int | None = None, out: Path | None = None,
                   progress: ProgressFn | None = None, stack: str | None = None
                   ) -> ValidationReport:
    """Median and P90 APE of TTFT and TPOT against measured serving benchmarks (serving.csv,
    serving.md into `out`); extras: the targets, the points a method refused, `by` and
    `stack` (None: the shipped default calibration for every point; 'backend': each point's
    own framework's stack; else a stack's name for every point). `progress(done, total)` is
    called after each point of each method."""
    allowed = DISAGG_METHODS if mode == "disagg" else SERVING_METHODS
    methods = method or list(allowed)
    _check_serving(methods, mode, points_per_group, out, seed, exclude_seed, stack)
    points = _serving_points(mode, arch, points_per_group, seed, exclude_seed)
    parts = [validate_serving(_serving_callable(m, mode, stack), points, method=m, by=by,
                              progress=offset(progress, i * len(points),
                                              len(methods) * len(points)))
             for i, m in enumerate(methods)]
    rows = pd.concat(parts, ignore_index=True)
    # points a method refused (InputError: e.g. the deployment does not fit in memory)
    skipped = [{"method": m, "point_id": pid, "reason": why}
               for m, part in zip(methods, parts, strict=True)
               for pid, why in part.attrs["skipped"]]
    sample = (f"{len(points)} of them (sample seed {seed}"
              + ("" if exclude_seed is None else f", without seed {exclude_seed}'s points")
              + ("" if arch == "all" else f", {arch} models only")
              + (", disaggregated" if mode == "disagg" else "")
              + ("" if stack is None else f", kernels priced by stack {stack!r}") + ")")
    coverage = shipped_coverage()
    _write(out, {"serving.csv": rows,
                 "serving.md": lambda: _serving_md(rows, sample, skipped, coverage)})
    return ValidationReport(rows, {"targets": SERVING_TARGETS, "skipped": skipped, "by": by,
                                   "stack": stack, "coverage": coverage})


def coverage_lines(coverage: dict) -> list[str]:
    """What share of the measured deployments perfcast can express, resolve and fit."""
    return [f"modelled: {coverage['modelled']} of {coverage['rows']} deployments of "
            f"silicon_sample_dev.csv ({coverage['share']:.1%}) resolve as `perfcast serve` "
            "requests and fit its memory planner",
            *[f"- refused ({r['field']}, {r['rows']} rows): {r['reason']}"
              for r in coverage["refused"]]]


def _serving_md(rows: pd.DataFrame, sample: str, skipped: list[dict], coverage: dict) -> str:
    return "\n".join([
        "# perfcast validate serving", "",
        f"Targets: median APE TTFT <= {SERVING_TARGETS['ttft']:.0%}, TPOT <= "
        f"{SERVING_TARGETS['tpot']:.0%}. Points: AIConfigurator silicon_sample_dev "
        f"(validate/data/README.md), {sample}.", "",
        md_table(rows), "",
        *[f"- skipped ({k['method']}) {k['point_id']}: {k['reason']}" for k in skipped],
        "", *coverage_lines(coverage), ""])


# --- training ------------------------------------------------------------------------------

def training_report(method: list[str] | None = None, split: list[str] | None = None,
                    by: str = "device", progress: ProgressFn | None = None) -> ValidationReport:
    """MAPE of tokens/s and MFU against MosaicML's measured MPT training grid, grouped per
    device, GPU-count bucket (scale) or model; extras: the target MAPE. `progress(done,
    total)` is called after each training point forecast."""
    methods = tuple(method or TRAINING_METHODS)
    splits = tuple(split or TRAINING_SPLITS)
    _check_choices("method", methods, TRAINING_METHODS)
    _check_choices("split", splits, TRAINING_SPLITS)
    if by not in TRAINING_BY:
        raise InputError("by", f"unknown grouping {by!r}", list(TRAINING_BY))
    rows = validate_training(methods=methods, splits=splits, progress=progress)
    rows = rows[rows["by"] == TRAINING_BY[by]].reset_index(drop=True)
    return ValidationReport(rows, {"target_mape": TRAINING_TARGET_MAPE,
                                   "target_under_predicted": list(TRAINING_TARGET_UNDER)})


# --- collectives ---------------------------------------------------------------------------

def collectives_report(split: list[str] | None = None, table7: bool = False,
                       out: Path | None = None, progress: ProgressFn | None = None
                       ) -> ValidationReport:
    """Collective MAPE per split x device x collective/size regime (collectives.csv,
    collectives.md into `out`); extras: the 8-GPU seconds table when asked for.
    `progress(done, total)` is called after each split (and the table)."""
    check_out_dir(out)
    total = len(split or COLLECTIVE_SPLITS) + (1 if table7 else 0)
    rows = validate_collectives(split, offset(progress, 0, total))
    table = collective_table7() if table7 else None
    if table is not None and progress is not None:
        progress(total, total)
    _write(out, {"collectives.csv": rows, "collectives.md": lambda: _collectives_md(rows, table)})
    extras: dict[str, Any] = {} if table is None else {"table7": table}
    verdict = multi_node_verdict(rows)
    if verdict:
        extras.update(multi_node_target_mape=MULTI_NODE_TARGET_MAPE,
                      multi_node_method=MULTI_NODE_METHOD, multi_node_verdict=verdict)
    return ValidationReport(rows, extras)


def _collectives_md(rows: pd.DataFrame, table: pd.DataFrame | None) -> str:
    parts = ["# perfcast validate collectives", "", "MAPE and P90 APE per split, device "
             "and `<collective>/<regime>` (small <= 64 KiB, large >= 64 MB).", "",
             md_table(_wide(rows)), ""]
    if table is not None:
        parts += ["## 8-GPU collectives: measured vs forecast seconds", "",
                  md_table(table), ""]
    return "\n".join(parts)
