"""`perfcast plot KIND --out FILE.png|.svg`: the report layer's pictures from the command
line. Forecast kinds (roofline, breakdown, memory, pipeline) take the options of
`perfcast infer/train` (declared from their request types) and build those requests; table
kinds (cdf, throughput-latency, pareto) read a CSV or Parquet table (`perfcast serve --out`, a
sweep)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any, get_args

import typer
from pydantic import TypeAdapter, ValidationError

from perfcast.api import InferRequest, Request, TrainRequest, TrainResult, resolve, run
from perfcast.cli._common import guarded
from perfcast.cli._console import Advanced
from perfcast.cli._progress import progress_bar
from perfcast.cli._train import train
from perfcast.errors import InputError, check_output_file

__all__ = ["plot_app"]

plot_app = typer.Typer(no_args_is_help=True, add_completion=False,
                       help="Draw a forecast or a result table as PNG or SVG.")

WORKLOADS = ("train", "infer")
ROOFLINE_MODES = ("forward", "training", "prefill", "decode")

_P = inspect.Parameter


def _opt(name: str, kind: Any, default: Any, help: str, panel: str | None = None) -> _P:
    return _P(name, _P.KEYWORD_ONLY, default=default,
              annotation=Annotated[kind, typer.Option(help=help, rich_help_panel=panel)])


def _panels(command: Any) -> dict[str, str | None]:
    """The help panel of each option of a command function, so that a plot lists the options
    it shares with `perfcast train` as train does (the advanced ones under --help-all)."""
    params = inspect.signature(command, eval_str=True).parameters.values()
    return {p.name: get_args(p.annotation)[1].rich_help_panel for p in params}


TRAIN_PANELS = _panels(train)


def _declare(request: type[Request], *names: str, skip: tuple[str, ...] = (),
             prefix: str = "", panel: str | None = None) -> list[_P]:
    """The options of `request` named (an option, or a group field: all its options), as
    typer parameters with the request's types, defaults and descriptions, in the help panel
    `panel`, or else the one `perfcast train` lists them in."""
    paths = request.option_paths()
    chosen = [o for n in names for o, (top, leaf) in paths.items()
              if (o == n or top == n and leaf is not None) and o not in skip]
    params = []
    for option in chosen:
        top, leaf = paths[option]
        field = request.model_fields[top]
        if leaf is not None:
            field = field.annotation.model_fields[leaf]
        default = field.get_default(call_default_factory=True)
        params.append(_opt(option, field.annotation, default, prefix + (field.description or ""),
                           panel or TRAIN_PANELS.get(option)))
    return params


OUT = _opt("out", Path, _P.empty, "Figure file to write: .png or .svg (never overwritten).")
HARDWARE = _declare(InferRequest, "model", "hardware", "dtype", "kernels")
TRAIN = _declare(TrainRequest, "plan", "workload", "recipe", "stack", skip=("dtype",))
INFER = _declare(InferRequest, "workload", "weight_dtype", "kv_dtype", "engine",
                 panel=Advanced.INFER_WORKLOAD)
COMPARE = [
    _opt("workload", str, "train", f"Which forecast: {', '.join(WORKLOADS)}."),
    _opt("vary", list[str] | None, None, "Side-by-side bars: OPTION=V1,V2,... (e.g. "
         "schedule=gpipe,1f1b or tp=1,2); repeat to cross options, or put several in one "
         "--vary, space-separated, to vary them together ('schedule=1f1b,interleaved-1f1b "
         "virtual-stages=1,2')."),
]
_TYPES = {p.name: get_args(p.annotation)[0] for p in [*HARDWARE, *TRAIN, *INFER]}


def _with_options(*groups: list[_P]):
    """Give a `**kw` command the options of `groups` (typer reads `__signature__`)."""
    def wrap(fn):
        own = [p for p in inspect.signature(fn, eval_str=True).parameters.values()
               if p.kind != _P.VAR_KEYWORD]
        fn.__signature__ = inspect.Signature([*own, *(p for g in groups for p in g)])
        return fn
    return wrap


def _request(cls: type[Request], options: dict, **more: Any) -> Request:
    """The `cls` request of the plot's options that `cls` takes."""
    paths = cls.option_paths()
    return cls.from_options({k: v for k, v in options.items() if k in paths}, **more)


def _train(options: dict) -> TrainResult:
    """The `perfcast train` forecast of one LLM iteration; a plot draws plans that do not
    fit in memory too."""
    result = run(_request(TrainRequest, options, allow_oom=True))
    if not isinstance(result, TrainResult):
        raise InputError("model", f"{options['model']}: plots draw an LLM training iteration",
                         "a transformer model")
    return result


_FIXED = ("vary", "workload", "out")


def _assignment(text: str, kw: dict) -> tuple[str, list]:
    """'name=v1,v2' -> (option name, parsed values)."""
    name, sep, values = text.partition("=")
    name = name.strip().replace("-", "_")
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
    """A --vary value as the option's declared type."""
    kind = _TYPES.get(name, str)
    try:
        return TypeAdapter(kind).validate_python(value)
    except ValidationError as exc:
        allowed = kind.__name__ if isinstance(kind, type) else str(kind)
        raise InputError("vary", f"{name}: {value!r} is not valid: {exc.errors()[0]['msg']}",
                         allowed) from None


def _forecasts(kw: dict) -> dict:
    """label -> forecast of each --vary variant; a bar over them when there are several
    (each takes up to a second)."""
    if kw["workload"] not in WORKLOADS:
        raise InputError("workload", f"unknown {kw['workload']!r}", WORKLOADS)
    variants, out = _variants(kw), {}
    with progress_bar("plot: forecasts", quiet=len(variants) < 2) as bar:
        for done, (label, options) in enumerate(variants.items(), start=1):
            if kw["workload"] == "train":
                fc = _train(options).forecast
            else:
                fc = run(_request(InferRequest, options)).forecast
            out[label or (options["model"] or "model")] = fc
            if bar is not None:
                bar(done, len(variants))
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
    check_output_file(out, "out")


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
    from perfcast.specs import Precision, parse_dtype

    _check_out(kw["out"])
    if mode not in ROOFLINE_MODES:
        raise InputError("mode", f"unknown mode {mode!r}", ROOFLINE_MODES)
    if kw["gpu"] is None:
        raise InputError("gpu", "give --gpu (the roofline is one device's)",
                         "see `hardware list`")
    r = resolve(_request(InferRequest, kw, tp=tp))
    spec, device, plan = r.model, r.machines.device, r.plan
    precision = Precision.uniform(parse_dtype(kw["dtype"], "dtype"))
    if mode in ("prefill", "decode"):
        shape = Batch.prefill(batch, seq_len) if mode == "prefill" else Batch.decode(batch,
                                                                                     seq_len)
        ops = step_ops(spec, shape, precision, plan)
    else:
        ops = eager_ops(spec, batch, seq_len, mode, precision, plan, fused)
    fig = roofline_figure(ops, device, r.time_model,
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
    from perfcast.specs import cuda_total_bytes

    _check_out(kw["out"])
    forecasts = _forecasts(kw)
    capacity = None
    if kw["workload"] == "infer":
        capacity = cuda_total_bytes(resolve(_request(InferRequest, kw)).machines.device)[0]
    _save(memory_figure(forecasts, capacity_bytes=capacity), kw["out"])


@plot_app.command("pipeline")
@guarded
@_with_options([OUT], HARDWARE, TRAIN)
def pipeline(**kw: Any) -> None:
    """The simulated pipeline schedule of one training iteration."""
    from perfcast.report import pipeline_figure

    _check_out(kw["out"])
    _save(pipeline_figure(_train(kw).schedule()), kw["out"])


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
