"""`perfcast validate kernels`: held-out per-kernel accuracy, three methods side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from perfcast.cli._common import emit_json, guarded
from perfcast.errors import InputError
from perfcast.measure import load_store
from perfcast.validate import TARGETS, summarise, validate_kernels

validate_app = typer.Typer(help="Accuracy against real measurements.", no_args_is_help=True)
console = Console(stderr=True)
SPLITS = ["generation", "neusight", "loo:aiconfigurator", "loo:neusight", "loo:vidur"]
BY_CHOICES = ("family", "dtype")


def _table(rows, title: str) -> Table:
    table = Table(title=title)
    for col in ("split", "device", "group", "n", "roofline", "cross_generation",
                "target_measured"):
        table.add_column(col, justify="right" if col not in ("split", "device", "group")
                         else "left")
    wide = rows.pivot_table(index=["split", "device", "group"], columns="method",
                            values="mape").reset_index()
    counts = rows.groupby(["split", "device", "group"])["n"].max()
    for r in wide.itertuples(index=False):
        d = r._asdict()
        table.add_row(d["split"], d["device"], d["group"], str(counts[(d["split"], d["device"],
                                                                        d["group"])]),
                      *(f"{d.get(m, float('nan')):.1%}" for m in
                        ("roofline", "cross_generation", "target_measured")))
    return table


def _md_table(frame) -> str:
    """A DataFrame as a GitHub Markdown table (floats to 4 places)."""
    cols = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame.itertuples(index=False):
        cells = [f"{v:.4f}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _wide(rows):
    wide = rows.pivot_table(index=["split", "device", "group", "n"], columns="method",
                            values=["mape", "p90_ape"])
    wide.columns = [f"{method} {stat}" for stat, method in wide.columns]
    return wide.reset_index()


def _markdown(rows, summary) -> str:
    sub = rows["group"].str.contains("/", regex=False)
    lines = ["# perfcast validate kernels", "",
             f"Targets: cross-generation median MAPE over families <= "
             f"{TARGETS['cross_generation_median_mape']:.0%} (splits generation, neusight); "
             f"target-measured <= {TARGETS['target_measured_mape']:.0%}.", "",
             "## Summary", "", "Median and pooled over kernel families (moe included; "
             "sub-groups left out, their rows are in their family).", "",
             _md_table(summary), "",
             "## MAPE and P90 APE per device and family", "", _md_table(_wide(rows[~sub])), ""]
    if sub.any():
        lines += ["## Sub-groups: MLA, quantised dtypes, MoE routing", "",
                  "`<family>/mla`: DeepSeek MLA attention; `<family>/<scheme>`: fp8, fp8_block, "
                  "fp4 (NVFP4), w-int4 / w-int8 (weight-only), int8 (SmoothQuant), `/kv-fp8` "
                  "(FP8 KV cache), `moe/<act>-w-<weights>` (mixed MoE), `moe/<distribution>` "
                  "(routing skew).", "", _md_table(_wide(rows[sub])), ""]
    return "\n".join(lines)


def _check_out(out: Path | None) -> None:
    """--out must be a directory (or not exist yet): nothing the user has is overwritten."""
    if out is not None and out.exists() and not out.is_dir():
        raise InputError("out", f"{out} exists and is not a directory", "a directory path")


def _check_choices(field: str, values, allowed, context: str = "") -> None:
    for value in values:
        if value not in allowed:
            raise InputError(field, f"unknown {field} {value!r}{context}", allowed)


@validate_app.command("kernels")
@guarded
def kernels(
    split: Annotated[list[str] | None, typer.Option(help=f"Splits to run: {', '.join(SPLITS)}."
                                                     )] = None,
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
                                         "moe/<routing distribution>.")] = "family",
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON rows.")] = False,
) -> None:
    """Per device x family MAPE and P90 APE: plain roofline, cross-generation, target-measured."""
    chosen = split or ["generation", "neusight"]
    if by not in BY_CHOICES:
        raise InputError("by", f"unknown grouping {by!r}", list(BY_CHOICES))
    _check_choices("split", chosen, SPLITS)
    _check_out(out)
    for name, value in (("train_rows", train_rows), ("test_rows", test_rows)):
        if value is not None and value < 10:
            raise InputError(name, f"must be >= 10, got {value}", ">= 10")
    train = train_rows or (400 if quick else 2000)
    test = test_rows or (300 if quick else None)
    rows = validate_kernels(load_store(), chosen, train_per_group=train, test_per_group=test,
                            seed=seed, by=by,
                            progress=lambda msg: console.print(f"[dim]fit/test {msg}[/dim]"))
    summary = summarise(rows)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        rows.to_csv(out / "kernels.csv", index=False)
        (out / "kernels.md").write_text(_markdown(rows, summary))
    if json_out:
        emit_json({"rows": rows.to_dict("records"), "summary": summary.to_dict("records"),
                   "targets": TARGETS})
        return
    out_console = Console()
    out_console.print(_table(rows, "Per-kernel MAPE on held-out devices"))
    out_console.print(summary.round(4).to_string(index=False))
    out_console.print(f"targets: {TARGETS}")


def _models_table(rows) -> Table:
    e2e = rows[rows["split"] == "models"]
    tiers = [m for m in ("target_measured", "cross_generation") if m in set(e2e["method"])]
    methods = ["roofline", "sum_of_kernels", "sum_of_measured_ops", *tiers]
    wide = e2e.pivot_table(index=["device", "group"], columns="method", values="mape")
    cover = e2e.dropna(subset=["coverage_90"]).set_index(["device", "group"])["coverage_90"]
    counts = e2e.groupby(["device", "group"])["n"].max()
    table = Table(title="Whole-model MAPE per device (NeuSight FP32 eager labels)")
    for col in ("device", "group", "n", *methods, "90% coverage"):
        table.add_column(col, justify="left" if col in ("device", "group") else "right")
    for (device, group), r in wide.iterrows():
        cells = [f"{r[m]:.1%}" if m in r and r[m] == r[m] else "-" for m in methods]
        table.add_row(device, group, str(counts[(device, group)]), *cells,
                      f"{cover.get((device, group), float('nan')):.0%}")
    return table


@validate_app.command("models")
@guarded
def models_cmd(
    out: Annotated[Path | None, typer.Option(help="Directory for models.md / models.csv.")
                   ] = None,
    per_op: Annotated[bool, typer.Option(help="Also check kernel families inside a layer.")
                      ] = True,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON rows.")] = False,
) -> None:
    """Whole-model forecasts against measured model times, beside the baselines."""
    from perfcast.validate import MODEL_TARGET_MAPE, validate_models

    _check_out(out)
    rows, forecasts = validate_models(per_op=per_op)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        rows.to_csv(out / "models.csv", index=False)
        forecasts.to_csv(out / "model_forecasts.csv", index=False)
        (out / "models.md").write_text(_models_markdown(rows, MODEL_TARGET_MAPE))
    if json_out:
        emit_json({"rows": rows.to_dict("records"), "target_mape": MODEL_TARGET_MAPE})
        return
    out_console = Console()
    out_console.print(_models_table(rows))
    op = rows[rows["split"] == "per_op"]
    if not op.empty:
        wide = op.pivot_table(index="group", columns="method", values="mape")
        out_console.print("per-op (kernel families in one layer, mean over devices):")
        out_console.print(wide.round(3).to_string())
    out_console.print(f"target: <= {MODEL_TARGET_MAPE:.0%} MAPE on every device")


def _models_markdown(rows, target: float) -> str:
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
        "## Whole-model MAPE", "", _md_table(wide), "",
        "## 90% interval coverage (perfcast tier)", "", _md_table(cover), "",
        "## Per-op: kernel families inside one layer (MAPE against the traces)", "",
        _md_table(op.reset_index()), ""])


SERVING_METHODS = ("perfcast", "sum_of_kernels", "roofline")


DISAGG_METHODS = ("perfcast", "roofline")


def _serving_callable(method: str, mode: str = "agg"):
    """agg: the serve engine (perfcast) or one-step analytic baselines; disagg: both pools
    simulated, with perfcast's kernel model or with the plain roofline."""
    from functools import partial

    from perfcast.kernels import RooflineModel
    from perfcast.validate import analytic_point, disagg_point, engine_point

    if mode == "disagg":
        return {"perfcast": disagg_point,
                "roofline": partial(disagg_point, time_model=RooflineModel())}[method]
    return {"perfcast": engine_point, "sum_of_kernels": analytic_point,
            "roofline": partial(analytic_point, time_model=RooflineModel())}[method]


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
        help="Group errors by model, or by technique (dense/moe x precision x disagg).")
                  ] = "model",
    exclude_seed: Annotated[int | None, typer.Option(
        help="Leave out the points the sample of this seed picks (a held-out check of "
             "choices made while looking at that sample).")] = None,
    out: Annotated[Path | None, typer.Option(help="Directory for serving.md / serving.csv.")
                   ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON rows.")] = False,
) -> None:
    """Median and P90 APE of TTFT and of TPOT against measured serving benchmarks."""
    import pandas as pd

    from perfcast.validate import (
        SERVING_TARGETS,
        load_disagg_points,
        load_serving_points,
        sample_serving_points,
        validate_serving,
    )

    if mode not in ("agg", "disagg"):
        raise InputError("mode", f"unknown {mode!r}", ("agg", "disagg"))
    allowed = DISAGG_METHODS if mode == "disagg" else SERVING_METHODS
    methods = method or list(allowed)
    _check_choices("method", methods, allowed, f" for --mode {mode}")
    if points_per_group is not None and points_per_group < 1:
        raise InputError("points_per_group", f"must be >= 1, got {points_per_group}", ">= 1")
    _check_out(out)
    for name, value in (("seed", seed), ("exclude_seed", exclude_seed)):
        if value is not None and value < 0:
            raise InputError(name, f"must be >= 0, got {value}", ">= 0")
    points = load_disagg_points() if mode == "disagg" else load_serving_points()
    if arch not in ("dense", "moe", "all"):
        raise InputError("arch", f"unknown {arch!r}", ("dense", "moe", "all"))
    if arch != "all":
        points = points[points["arch"] == arch]
    if exclude_seed is not None:
        if points_per_group is None:
            raise InputError("exclude_seed", "needs --points-per-group (the sample to leave "
                             "out)", "with --points-per-group")
        seen = sample_serving_points(points, points_per_group, exclude_seed)["point_id"]
        points = points[~points["point_id"].isin(seen)]
    points = sample_serving_points(points, points_per_group, seed)
    parts = [validate_serving(_serving_callable(m, mode), points, method=m, by=by)
             for m in methods]
    rows = pd.concat(parts, ignore_index=True)
    # points a method refused (InputError: e.g. the deployment does not fit in memory)
    skipped = [{"method": m, "point_id": pid, "reason": why}
               for m, part in zip(methods, parts, strict=True)
               for pid, why in part.attrs["skipped"]]
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        rows.to_csv(out / "serving.csv", index=False)
        (out / "serving.md").write_text("\n".join([
            "# perfcast validate serving", "",
            f"Targets: median APE TTFT <= {SERVING_TARGETS['ttft']:.0%}, TPOT <= "
            f"{SERVING_TARGETS['tpot']:.0%}. Points: AIConfigurator silicon_sample_dev "
            f"(validate/data/README.md), {len(points)} of them (sample seed {seed}"
            + ("" if exclude_seed is None else f", without seed {exclude_seed}'s points")
            + ("" if arch == "all" else f", {arch} models only")
            + (", disaggregated" if mode == "disagg" else "")
            + ").", "",
            _md_table(rows), "",
            *[f"- skipped ({k['method']}) {k['point_id']}: {k['reason']}" for k in skipped],
            ""]))
    if json_out:
        emit_json({"rows": rows.to_dict("records"), "targets": SERVING_TARGETS,
                   "skipped": skipped})
        return
    wide = rows.pivot_table(index=["split", "device", "group"], columns="method",
                            values="median_ape")
    Console().print(wide.round(3).to_string())
    Console().print(f"targets (median APE): {SERVING_TARGETS}")
    for k in skipped:
        Console().print(f"skipped ({k['method']}) {k['point_id']}: {k['reason']}")


TRAINING_BY = {"device": "metric", "scale": "scale", "model": "model"}
TRAINING_SPLITS = ("all", "heldout_device", "heldout_model")


@validate_app.command("training")
@guarded
def training_cmd(
    method: Annotated[list[str] | None, typer.Option(
        help="roofline (plain roofline + alpha-beta ring: the baseline), sum_of_kernels "
             "(calibrated kernels, default collectives) or perfcast (sum_of_kernels with "
             "training-stack factors fitted held out; held-out splits only).")] = None,
    split: Annotated[list[str] | None, typer.Option(
        help="all, heldout_device (factors fitted on the other GPU generation) or "
             "heldout_model (on the same generation's other models); default: all three.")
                     ] = None,
    by: Annotated[str, typer.Option(
        help="Group errors per device, per GPU-count bucket (scale) or per model.")
                  ] = "device",
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON rows.")] = False,
) -> None:
    """MAPE of tokens/s and MFU against MosaicML's measured MPT training grid (216 runs)."""
    from perfcast.validate import TRAINING_METHODS, TRAINING_TARGET_MAPE, validate_training

    methods = tuple(method or TRAINING_METHODS)
    splits = tuple(split or TRAINING_SPLITS)
    _check_choices("method", methods, TRAINING_METHODS)
    _check_choices("split", splits, TRAINING_SPLITS)
    if by not in TRAINING_BY:
        raise InputError("by", f"unknown grouping {by!r}", list(TRAINING_BY))
    rows = validate_training(methods=methods, splits=splits)
    rows = rows[rows["by"] == TRAINING_BY[by]].reset_index(drop=True)
    if json_out:
        emit_json({"rows": rows.to_dict("records"), "target_mape": TRAINING_TARGET_MAPE})
        return
    wide = rows.pivot_table(index=["split", "device", "group", "n"], columns="method",
                            values="mape")
    Console().print(wide.round(3).to_string())
    Console().print(f"target: MAPE <= {TRAINING_TARGET_MAPE:.0%} (tokens/s and MFU; "
                    "mfu in MosaicML's FLOP count, mfu_perfcast in perfcast's)")


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
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON rows.")] = False,
) -> None:
    """Collective MAPE per split x device x collective/size regime, beside two baselines."""
    from perfcast.validate import collective_table7, validate_collectives

    _check_out(out)
    rows = validate_collectives(split)
    table = collective_table7() if table7 else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        rows.to_csv(out / "collectives.csv", index=False)
        parts = ["# perfcast validate collectives", "", "MAPE and P90 APE per split, device "
                 "and `<collective>/<regime>` (small <= 64 KiB, large >= 64 MB).", "",
                 _md_table(_wide(rows)), ""]
        if table is not None:
            parts += ["## 8-GPU collectives: measured vs forecast seconds", "",
                      _md_table(table), ""]
        (out / "collectives.md").write_text("\n".join(parts))
    if json_out:
        payload = {"rows": rows.to_dict("records")}
        if table is not None:
            payload["table7"] = table.to_dict("records")
        emit_json(payload)
        return
    wide = rows.pivot_table(index=["split", "device", "group"], columns="method",
                            values="mape")
    Console().print(wide.round(3).to_string())
    if table is not None:
        Console().print(_table7(table))


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
    _check_out(out)

    def sub(name: str) -> Path | None:
        return None if out is None else out / name

    console.rule("kernels: per-kernel MAPE on held-out devices")
    kernels(quick=quick, out=sub("kernels"))
    console.rule("models: whole-model forecasts against measured model times")
    models_cmd(out=sub("models"))
    for mode in ("agg", "disagg"):
        console.rule(f"serving ({mode}): TTFT/TPOT against measured serving benchmarks")
        serving_cmd(mode=mode, points_per_group=1 if quick else None,
                    out=sub(f"serving-{mode}"))
    console.rule("training: MPT tokens/s and MFU (llm-foundry)")
    training_cmd()
    console.rule("collectives: NCCL collectives per message-size regime")
    collectives_cmd(out=sub("collectives"))
