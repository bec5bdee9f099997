"""`perfcast plot KIND --out FILE.png|.svg`: the report layer's pictures from the command
line. Forecast kinds (roofline, breakdown, memory, pipeline) take the same model, hardware
and plan options as `perfcast step/infer/train` and reuse their parsing; table kinds (cdf,
throughput-latency, pareto) read a CSV or Parquet table (`perfcast serve --out`, a sweep)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any

import typer

from perfcast.api._choices import kernel_model, machines_for
from perfcast.api._choices import precision_spec as _precision
from perfcast.api._infer import inference_plan as _plan
from perfcast.cli._common import guarded
from perfcast.cli._train import _layout, _schedule
from perfcast.errors import InputError

__all__ = ["plot_app"]

plot_app = typer.Typer(no_args_is_help=True, add_completion=False,
                       help="Draw a forecast or a result table as PNG or SVG.")

WORKLOADS = ("train", "infer")
ROOFLINE_MODES = ("forward", "training", "prefill", "decode")

_P = inspect.Parameter


def _opt(name: str, kind: Any, default: Any, help: str, flag: str | None = None) -> _P:
    option = typer.Option(flag, help=help) if flag else typer.Option(help=help)
    return _P(name, _P.KEYWORD_ONLY, annotation=Annotated[kind, option], default=default)


OUT = _opt("out", Path, _P.empty, "Figure file to write: .png or .svg (never overwritten).")
HARDWARE = [
    _opt("model", str | None, None, "Catalog model name or HF id."),
    _opt("model_config", str | None, None, "Path to an HF config.json."),
    _opt("gpu", str | None, None, "Catalog GPU (see `perfcast hardware list`)."),
    _opt("cluster", str | None, None, "Cluster preset instead of --gpu."),
    _opt("dtype", str, "bf16", "Activation and math dtype (train: bf16, fp16, fp32, fp8)."),
    _opt("kernel_model_name", str, "calibrated", "calibrated or roofline.", "--kernel-model"),
    _opt("calibration", str | None, None, "Extra calibration JSON from `perfcast calibrate`."),
]
TRAIN = [
    _opt("num_gpus", int | None, None, "GPUs (= tp x pp x cp x dp)."),
    _opt("tp", int, 1, "Tensor-parallel degree."),
    _opt("pp", int, 1, "Pipeline stages."),
    _opt("dp", int | None, None, "Data-parallel degree (default: fills --num-gpus)."),
    _opt("ep", int, 1, "Expert-parallel degree (MoE)."),
    _opt("cp", int, 1, "Context-parallel degree."),
    _opt("sp", bool, False, "Megatron sequence parallelism."),
    _opt("zero", int, 0, "ZeRO stage 0-3."),
    _opt("schedule", str, "1f1b", "gpipe, 1f1b or interleaved-1f1b."),
    _opt("virtual_stages", int, 1, "Model chunks per stage (interleaved-1f1b)."),
    _opt("micro_batch", int, 1, "Sequences per micro-batch per DP rank."),
    _opt("global_batch", int | None, None, "Sequences per iteration, all DP ranks."),
    _opt("seq_len", int, 2048, "Tokens per sequence."),
    _opt("recompute", str, "none", "none, selective or full."),
    _opt("lora_rank", int | None, None, "LoRA rank on all linear layers."),
    _opt("stack", str, "none", "Training software stack: none or llm-foundry."),
]
INFER = [
    _opt("prompt_tokens", int, 512, "infer: prompt length per request."),
    _opt("output_tokens", int, 128, "infer: generated tokens per request."),
    _opt("batch", int, 1, "infer: requests run together (static batch)."),
    _opt("weight_dtype", str | None, None, "infer: weight dtype, e.g. int4 (W4A16)."),
    _opt("kv_dtype", str | None, None, "infer: KV-cache dtype."),
]
COMPARE = [
    _opt("workload", str, "train", f"Which forecast: {', '.join(WORKLOADS)}."),
    _opt("vary", list[str] | None, None, "Side-by-side bars: OPTION=V1,V2,... (e.g. "
         "schedule=gpipe,1f1b or tp=1,2); repeat to cross options, or put several in one "
         "--vary, space-separated, to vary them together ('schedule=1f1b,interleaved-1f1b "
         "virtual-stages=1,2')."),
]
_INTS = {"num_gpus", "tp", "pp", "dp", "ep", "cp", "zero", "virtual_stages", "micro_batch",
         "global_batch", "seq_len", "lora_rank", "prompt_tokens", "output_tokens", "batch"}


def _with_options(*groups: list[_P]):
    """Give a `**kw` command the options of `groups` (typer reads `__signature__`)."""
    def wrap(fn):
        own = [p for p in inspect.signature(fn, eval_str=True).parameters.values()
               if p.kind != _P.VAR_KEYWORD]
        fn.__signature__ = inspect.Signature([*own, *(p for g in groups for p in g)])
        return fn
    return wrap


def _time_model(kw: dict):
    """The kernel model of --kernel-model/--calibration (the other commands' parsing)."""
    return kernel_model(kw["kernel_model_name"], kw["calibration"])[0]


def _train_job(kw: dict):
    """TrainJob and kernel model from train-style options (the `perfcast train` rules)."""
    from perfcast.specs import ParallelPlan, get_model, parse_dtype
    from perfcast.train import RECOMPUTE, TrainJob, stack_time_model, training_precision

    if kw["recompute"] not in RECOMPUTE:
        raise InputError("recompute", f"unknown {kw['recompute']!r}", RECOMPUTE)
    if kw["stack"] != "none" and kw["kernel_model_name"] != "calibrated":
        raise InputError("stack", "a stack profile scales the calibrated kernel model",
                         "--stack none, or --kernel-model calibrated")
    dp, gpus = _layout(kw["num_gpus"], kw["tp"], kw["pp"], kw["dp"], kw["cp"])
    machines = machines_for(kw["gpu"], kw["cluster"], kw["num_gpus"] or gpus)
    time_model = stack_time_model(kw["stack"], machines.device, _time_model(kw))
    plan = ParallelPlan(tp=kw["tp"], pp=kw["pp"], dp=dp, ep=kw["ep"], cp=kw["cp"], sp=kw["sp"],
                        zero_stage=kw["zero"], schedule=_schedule(kw["schedule"]),
                        virtual_stages=kw["virtual_stages"])
    job = TrainJob(model=get_model(kw["model"], kw["model_config"]), cluster=machines,
                   plan=plan, seq_len=kw["seq_len"], micro_batch=kw["micro_batch"],
                   global_batch=kw["global_batch"] or kw["micro_batch"] * dp,
                   precision=training_precision(parse_dtype(kw["dtype"], "dtype")),
                   recompute=kw["recompute"], lora_rank=kw["lora_rank"])
    return job, time_model


def _infer_forecast(kw: dict):
    """InferenceForecast from infer-style options (the `perfcast infer` rules)."""
    from perfcast.compose import forecast_inference
    from perfcast.specs import get_model

    plan = _plan(kw["tp"], kw["num_gpus"])
    box = machines_for(kw["gpu"], kw["cluster"], plan.tp)
    return forecast_inference(
        get_model(kw["model"], kw["model_config"]), box, batch=kw["batch"],
        prompt_tokens=kw["prompt_tokens"], output_tokens=kw["output_tokens"],
        precision=_precision(kw["dtype"], kw["kv_dtype"], kw["weight_dtype"]), plan=plan,
        time_model=_time_model(kw))


_FIXED = ("vary", "workload", "out")


def _assignment(text: str, kw: dict) -> tuple[str, list]:
    """'name=v1,v2' -> (option name, parsed values)."""
    name, sep, values = text.partition("=")
    name = name.strip().replace("-", "_")
    name = "kernel_model_name" if name == "kernel_model" else name
    if not sep or not values or name not in kw or name in _FIXED:
        raise InputError("vary", f"{text!r} is not OPTION=V1,V2,...",
                         sorted(k for k in kw if k not in _FIXED))
    return name, [_parse(name, v.strip()) for v in values.split(",")]


def _variants(kw: dict) -> dict[str, dict]:
    """label -> options. Each --vary is OPTION=V1,V2,... or several such separated by
    spaces, varied together (zipped: equal lengths); separate --vary flags are crossed."""
    out = {"": dict(kw)}
    for spec in kw.get("vary") or []:
        pairs = [_assignment(part, kw) for part in spec.split()]
        lengths = {len(values) for _, values in pairs}
        if len(lengths) != 1:
            raise InputError("vary", f"{spec!r}: options varied together need as many values "
                             "each", "equal-length value lists")
        steps = [dict(zip([n for n, _ in pairs], vals, strict=True))
                 for vals in zip(*(v for _, v in pairs), strict=True)]
        out = {(label + "\n" + "\n".join(f"{n}={v}" for n, v in step.items())).strip():
               {**o, **step} for label, o in out.items() for step in steps}
    return out


def _parse(name: str, value: str):
    if name in _INTS:
        try:
            return int(value)
        except ValueError:
            raise InputError("vary", f"{name} takes integers, got {value!r}", "integers") from None
    if name == "sp":
        return value.lower() in ("1", "true", "yes", "on")
    return value


def _forecasts(kw: dict) -> dict:
    if kw["workload"] not in WORKLOADS:
        raise InputError("workload", f"unknown {kw['workload']!r}", WORKLOADS)
    out = {}
    for label, options in _variants(kw).items():
        if kw["workload"] == "train":
            from perfcast.train import forecast_training

            job, time_model = _train_job(options)
            fc = forecast_training(job, time_model=time_model)
        else:
            fc = _infer_forecast(options)
        out[label or (options["model"] or "model")] = fc
    return out


def _save(fig, out: Path) -> None:
    from perfcast.report import save_figure

    typer.echo(f"wrote {save_figure(fig, out)}")


def _check_out(out: Path) -> None:
    """Fail on the output path before any forecast runs."""
    from perfcast.report import FIGURE_FORMATS

    if out.suffix.lower() not in FIGURE_FORMATS:
        raise InputError("out", f"unknown figure format {out.suffix or '(none)'!r}",
                         FIGURE_FORMATS)
    if out.exists():
        raise InputError("out", f"{out} exists; refusing to overwrite it", "a new file")


@plot_app.command("roofline")
@guarded
@_with_options([OUT], HARDWARE)
def roofline(
    batch: Annotated[int, typer.Option(help="Sequences in the batch.")] = 1,
    seq_len: Annotated[int, typer.Option(help="Tokens per sequence (decode: context).")] = 512,
    mode: Annotated[str, typer.Option(help=f"{', '.join(ROOFLINE_MODES)}.")] = "forward",
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree (one GPU's kernels).")] = 1,
    fused: Annotated[bool, typer.Option(help="forward/training: apply the fusion rules.")
                     ] = False,
    **kw: Any,
) -> None:
    """Kernels of one model step on a GPU against the device's roofline."""
    from perfcast.ops import Batch, eager_ops, step_ops
    from perfcast.report import roofline_figure
    from perfcast.specs import ParallelPlan, Precision, get_device, get_model, parse_dtype

    _check_out(kw["out"])
    if mode not in ROOFLINE_MODES:
        raise InputError("mode", f"unknown mode {mode!r}", ROOFLINE_MODES)
    if kw["gpu"] is None:
        raise InputError("gpu", "give --gpu (the roofline is one device's)",
                         "see `hardware list`")
    spec, device = get_model(kw["model"], kw["model_config"]), get_device(kw["gpu"])
    precision, plan = Precision.uniform(parse_dtype(kw["dtype"], "dtype")), ParallelPlan(tp=tp)
    if mode in ("prefill", "decode"):
        shape = Batch.prefill(batch, seq_len) if mode == "prefill" else Batch.decode(batch,
                                                                                     seq_len)
        ops = step_ops(spec, shape, precision, plan)
    else:
        ops = eager_ops(spec, batch, seq_len, mode, precision, plan, fused)
    fig = roofline_figure(ops, device, _time_model(kw),
                          title=f"{spec.name} {mode} (batch {batch} x {seq_len}) on "
                                f"{device.name}")
    _save(fig, kw["out"])


@plot_app.command("breakdown")
@guarded
@_with_options([OUT], COMPARE, HARDWARE, TRAIN, INFER)
def breakdown(**kw: Any) -> None:
    """Where the time goes: stacked bars of one forecast, or one per --vary value."""
    from perfcast.report import breakdown_figure

    _check_out(kw["out"])
    what = "iteration" if kw["workload"] == "train" else "end-to-end latency"
    _save(breakdown_figure(_forecasts(kw), title=f"Where the time goes ({what})"), kw["out"])


@plot_app.command("memory")
@guarded
@_with_options([OUT], COMPARE, HARDWARE, TRAIN, INFER)
def memory(**kw: Any) -> None:
    """Memory per GPU by kind, against the device's capacity."""
    from perfcast.report import memory_figure

    _check_out(kw["out"])
    forecasts = _forecasts(kw)
    capacity = None
    if kw["workload"] == "infer":
        from perfcast.specs import get_cluster, get_device

        device = get_device(kw["gpu"]) if kw["gpu"] else get_cluster(kw["cluster"], 1).device
        capacity = device.hbm_capacity_bytes
    _save(memory_figure(forecasts, capacity_bytes=capacity), kw["out"])


@plot_app.command("pipeline")
@guarded
@_with_options([OUT], HARDWARE, TRAIN)
def pipeline(**kw: Any) -> None:
    """The simulated pipeline schedule of one training iteration."""
    from perfcast.report import pipeline_figure, training_schedule

    _check_out(kw["out"])
    job, time_model = _train_job(kw)
    _save(pipeline_figure(training_schedule(job, time_model=time_model)), kw["out"])


def read_table(path: Path, field: str):
    """A CSV or Parquet table."""
    import pandas as pd

    if path.suffix not in (".csv", ".parquet"):
        raise InputError(field, f"unknown table format {path.suffix or '(none)'!r} of {path}",
                         [".csv", ".parquet"])
    if not path.is_file():
        raise InputError(field, f"{path} does not exist", "a CSV or Parquet file")
    return pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)


def column(table, name: str, field: str) -> str:
    """`name`, or the one `out.NAME` / `in.NAME` column of a `perfcast sweep` result."""
    if name in table.columns:
        return name
    hits = [c for c in (f"out.{name}", f"in.{name}") if c in table.columns]
    if len(hits) == 1:
        return hits[0]
    raise InputError(field, f"no column {name!r} in the table", [str(c) for c in table.columns])


def swept(table, exclude: tuple[str, ...]) -> list[str]:
    """A sweep's varied inputs: `in.*` columns holding more than one value."""
    return [c for c in table.columns if str(c).startswith("in.") and c not in exclude
            and table[c].nunique(dropna=False) > 1]


@plot_app.command("cdf")
@guarded
def cdf(
    requests: Annotated[list[Path], typer.Option(
        help="Per-request table(s) from `perfcast serve --out` (.csv/.parquet); repeat to "
             "overlay runs.")],
    out: Annotated[Path, typer.Option(help="Figure file to write: .png or .svg.")],
    metric: Annotated[list[str] | None, typer.Option(
        help="Per-request column(s) in seconds (default ttft_s and tpot_s).")] = None,
) -> None:
    """Empirical CDFs of per-request TTFT/TPOT/E2E of one or several serving runs."""
    from perfcast.report import cdf_figure

    _check_out(out)
    stems = [p.stem for p in requests]
    runs = {p.stem if stems.count(p.stem) == 1 else str(p): read_table(p, "requests")
            for p in requests}
    _save(cdf_figure(runs, tuple(metric or ("ttft_s", "tpot_s"))), out)


@plot_app.command("throughput-latency")
@guarded
def throughput_latency(
    table: Annotated[Path, typer.Option(help="QPS sweep result (.csv/.parquet).")],
    out: Annotated[Path, typer.Option(help="Figure file to write: .png or .svg.")],
    x: Annotated[str, typer.Option(help="Throughput column.")] = "throughput_tok_s",
    y: Annotated[list[str] | None, typer.Option(
        help="Latency column(s) in seconds (default e2e_s.p50 and e2e_s.p99). A name missing "
             "from the table also matches a sweep's out.NAME / in.NAME column.")] = None,
    group: Annotated[list[str] | None, typer.Option(
        help="Column(s) naming a configuration: one curve each (default: a sweep's varied "
             "in.* columns).")] = None,
    order: Annotated[str, typer.Option(help="Column joining points (offered load).")] = "qps",
) -> None:
    """Latency against throughput, one curve per configuration of a QPS sweep."""
    from perfcast.report import throughput_latency_figure

    _check_out(out)
    frame = read_table(table, "table")
    x = column(frame, x, "x")
    ys = tuple(column(frame, c, "y") for c in y or ("e2e_s.p50", "e2e_s.p99"))
    order = column(frame, order, "order") if order else x
    groups = [column(frame, g, "group") for g in group or []] or swept(frame, (order, x))
    _save(throughput_latency_figure(frame, x, ys, groups or None, order), out)


@plot_app.command("pareto")
@guarded
def pareto(
    table: Annotated[Path, typer.Option(help="Sweep result (.csv/.parquet).")],
    out: Annotated[Path, typer.Option(help="Figure file to write: .png or .svg.")],
    x: Annotated[str, typer.Option(help="Cost column (minimised).")],
    y: Annotated[str, typer.Option(help="Latency column (minimised).")],
    label: Annotated[str | None, typer.Option(help="Column labelling front points.")] = None,
) -> None:
    """Cost against latency with the Pareto front of non-dominated configurations."""
    from perfcast.report import pareto_figure

    _check_out(out)
    frame = read_table(table, "table")
    label = column(frame, label, "label") if label else None
    _save(pareto_figure(frame, column(frame, x, "x"), column(frame, y, "y"), label), out)
