"""End-to-end serving forecasts (TTFT, TPOT) against measured benchmark points.

The points (validate/data/serving_points.csv, built by scripts/build_serving_points.py) are
AIConfigurator's measured aggregated-serving runs on H100/B200 (TensorRT-LLM, vLLM, SGLang):
a benchmark client keeps `concurrency` requests of `isl` prompt / `osl` output tokens in
flight and reports mean TTFT and TPOT. `validate_serving` asks any callable for each point's
(ttft_s, tpot_s) — the serve engine in a closed loop, or `analytic_point` — and reports
absolute percentage errors per metric, so over- and under-forecasts never cancel.

Kernels are priced by the shipped default calibration (today's pricing, = the `trtllm`
stack's), or per `stack` (`point_stack`): one named stack for every point, or with
`stack='backend'` the stack each point's `backend` column names (trtllm, vllm, sglang: each
framework's own kernel tables, `perfcast.kernels.stack_kernel_model`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from functools import cache
from importlib import resources

import numpy as np
import pandas as pd

from perfcast.comm import CustomAllReduce
from perfcast.compose import ServingStepModel
from perfcast.errors import InputError
from perfcast.kernels import (
    ExecutionTimeModel,
    PhysicsModel,
    shipped_calibration,
    stack_kernel_model,
)
from perfcast.progress import ProgressFn
from perfcast.serve._config import DEFAULT_EXPERT_SKEW
from perfcast.specs import (
    DType,
    ParallelPlan,
    Precision,
    cluster_for,
    get_device,
    get_model,
    get_stack,
    stack_names,
)
from perfcast.validate._stats import ape_summary

__all__ = ["BY_BACKEND", "GRID_BATCH", "SERVING_TARGETS", "analytic_point", "check_stack",
           "load_serving_points", "point_precision", "point_stack", "sample_serving_points",
           "serving_residuals", "validate_serving"]

# Sequences a replay's step model covers at least (more for a higher concurrency): one step
# model serves every point of a deployment, and building it is most of a replay's cost.
GRID_BATCH = 1024

SERVING_TARGETS = {"ttft": 0.10, "tpot": 0.07}  # median APE targets (issue 5)
POINT_COLUMNS = ("point_id", "backend", "model", "device", "precision", "isl", "osl",
                 "concurrency", "ttft_s", "tpot_s")  # layouts: tp/pp (agg) or per pool
SimulatePoint = Callable[[pd.Series], tuple[float, float]]
_STEP_MODELS: OrderedDict[tuple, tuple[object, ServingStepModel]] = OrderedDict()
# Step models kept at once: their grids are the cost of a point but take up to a few hundred
# MB each; the points come grouped by deployment, so a few suffice (all of them: > 20 GB).
KEPT_STEP_MODELS = 8
_STACK_MODELS: dict[tuple, tuple[object, ExecutionTimeModel]] = {}
BY_BACKEND = "backend"  # `stack` value: each point priced with its backend column's stack


def kept_step_model(models: OrderedDict, key: tuple, time_model: object,
                    make: Callable[[], ServingStepModel]) -> ServingStepModel:
    """`models[key]`'s step model, made by `make` if missing; the KEPT_STEP_MODELS most
    recently used kept (holding `time_model` keeps its id(), part of `key`, unique)."""
    if key in models:
        models.move_to_end(key)
    else:
        models[key] = (time_model, make())
        while len(models) > KEPT_STEP_MODELS:
            models.popitem(last=False)
    return models[key][1]


def check_stack(stack: str | None) -> None:
    """`stack` is None (the default calibration), 'backend' or a shipped stack's name."""
    if stack is not None and stack != BY_BACKEND:
        try:
            get_stack(stack)
        except InputError:
            raise InputError("stack", f"unknown stack {stack!r}",
                             [BY_BACKEND, *stack_names()]) from None


def point_stack(point: pd.Series, stack: str | None) -> str | None:
    """The stack whose kernel tables price `point`: its `backend` column's (trtllm, vllm,
    sglang are stack names) with stack='backend', else `stack` itself (None: the shipped
    default calibration)."""
    return str(point["backend"]) if stack == BY_BACKEND else stack


def stacked_time_model(stack: str | None, base: ExecutionTimeModel) -> ExecutionTimeModel:
    """`base` with `stack`'s kernel families priced by its own tables
    (`stack_kernel_model`, the serve engine's path), one instance per (stack, base) so the
    step models built on it are kept; `base` itself for None or a stack routing nothing."""
    if stack is None:
        return base
    key = (get_stack(stack).name, id(base))
    if key not in _STACK_MODELS:  # holding base keeps its id() unique
        _STACK_MODELS[key] = (base, stack_kernel_model(get_stack(stack), base))
    return _STACK_MODELS[key][1]


def load_serving_points() -> pd.DataFrame:
    """The shipped measured serving points, one row per (deployment, isl, osl, concurrency)."""
    with (resources.files("perfcast.validate") / "data" / "serving_points.csv").open("rb") as f:
        return pd.read_csv(f, keep_default_na=False, na_values=[""])


def sample_serving_points(points: pd.DataFrame, per_group: int | None, seed: int = 0
                          ) -> pd.DataFrame:
    """Up to `per_group` points per (model, device, backend, precision), seeded; all of
    them when `per_group` is None."""
    if per_group is None:
        return points
    rng = np.random.default_rng(seed)
    keys = ["model", "device", "backend", "precision"]
    idx = [rng.permutation(g.index.to_numpy())[:per_group] for _, g in points.groupby(keys)]
    return points.loc[sorted(np.concatenate(idx))]


def point_precision(point: pd.Series) -> Precision:
    """Weights and activations in the point's precision; the KV cache in fp8 for fp8/fp4
    deployments (what these benchmarks' quantised configs use), else bf16; FP8/FP4
    activations quantised inside the producing kernel (`activation_quant='fused'`), as the
    serving engines' graphs do. Assumptions stated here, not fitted."""
    dtype = DType(point["precision"])
    if dtype in (DType.INT4, DType.INT8):  # AIConfigurator's int4_wo: weight-only, bf16 math
        return Precision(weights=dtype, activations=DType.BF16, kv_cache=DType.BF16)
    kv = DType.FP8 if dtype in (DType.FP8, DType.FP4) else DType.BF16
    precision = Precision(weights=dtype, activations=dtype, kv_cache=kv, activation_quant="fused")
    if "device" in point:  # fp4 checkpoints on Hopper run W4A16 (Precision.weight_only_on)
        precision, _ = precision.weight_only_on(get_device(point["device"]).dtypes)
    return precision


def point_layout(point: pd.Series) -> dict[str, int]:
    """Attention-DP ranks `dp` and expert-parallel degree `ep` of a point (1 for dense points
    and for points files without the columns)."""
    ep, dp = point.get("ep", 1), point.get("dp", 1)
    ep = 1 if pd.isna(ep) else int(ep)
    return {"ep": ep, "dp": 1 if ep == 1 or pd.isna(dp) else int(dp)}


def point_plan(point: pd.Series) -> ParallelPlan:
    """The point's parallel plan: tp, pp, attention-DP ranks and EP (ServeConfig's default
    expert skew, the one the serve engine uses)."""
    layout = point_layout(point)
    return ParallelPlan(tp=int(point["tp"]), pp=int(point["pp"]), dp=layout["dp"],
                        ep=layout["ep"], expert_skew=DEFAULT_EXPERT_SKEW)


def _step_model(point: pd.Series, time_model: ExecutionTimeModel, host: str
                ) -> ServingStepModel:
    """One ServingStepModel per deployment and time model, kept (its grids are the cost);
    TP all-reduces by the engines' custom kernel, as the serve engine prices them."""
    plan = point_plan(point)
    key = (point["model"], point["device"], plan, point["precision"], host, id(time_model))
    device = get_device(point["device"])
    return kept_step_model(_STEP_MODELS, key, time_model, lambda: ServingStepModel(
        get_model(point["model"]), cluster_for(device, plan.num_gpus), point_precision(point),
        plan, time_model, host=host, max_seqs=max(GRID_BATCH, int(point["concurrency"])),
        comm_model=CustomAllReduce()))


@cache
def _calibrated() -> PhysicsModel:
    return PhysicsModel(shipped_calibration())


def analytic_point(point: pd.Series, time_model: ExecutionTimeModel | None = None,
                   host: str = "none", stack: str | None = None) -> tuple[float, float]:
    """(ttft_s, tpot_s) with no queueing: TTFT = one prefill step of `isl` tokens alone;
    TPOT = one decode step of `concurrency` sequences at the mean decode context
    (isl + osl/2). A sum-of-kernels baseline (CUDA graphs; host overhead per `host`): it
    ignores waiting for other requests' prefills, so it under-forecasts loaded points.
    Kernels priced per `stack` (`point_stack`; None: the shipped default calibration)."""
    tm = stacked_time_model(point_stack(point, stack), time_model or _calibrated())
    sm = _step_model(point, tm, host)
    isl, osl, conc = int(point["isl"]), int(point["osl"]), int(point["concurrency"])
    ttft = sm.step_time_s(prefill_tokens=(isl,), prefill_context=(0,))
    tpot = sm.step_time_s(decode_context=(isl + osl // 2,) * conc)
    return float(ttft), float(tpot)


def serving_residuals(simulate_point: SimulatePoint | None = None,
                      points: pd.DataFrame | None = None,
                      progress: ProgressFn | None = None) -> pd.DataFrame:
    """Per point and metric: measured, forecast and APE (|forecast / measured - 1|).
    Points the callable refuses with an InputError are left out and listed in
    `.attrs["skipped"]` as (point_id, message). `progress(done, total)` is called after
    each point (a replay can take minutes)."""
    points = load_serving_points() if points is None else points
    missing = [c for c in POINT_COLUMNS if c not in points]
    if missing:
        raise InputError("points", f"missing columns {missing}", POINT_COLUMNS)
    simulate = simulate_point or analytic_point
    rows, skipped = [], []
    for done, (_, p) in enumerate(points.iterrows(), start=1):
        try:
            forecast = simulate(p)
        except InputError as e:
            skipped.append((p["point_id"], str(e)))
        else:
            rows += _point_rows(p, forecast)
        if progress is not None:
            progress(done, len(points))
    out = pd.DataFrame(rows, columns=["point_id", "split", "device", "model", "metric",
                                      "measured_s", "forecast_s", "ape"])
    out.attrs["skipped"] = skipped
    return out


def _point_rows(p: pd.Series, forecast: tuple[float, float]) -> list[dict]:
    """The point's two residual rows (ttft, tpot); a forecast that is not two finite
    positive seconds is the callable's error."""
    if len(forecast) != 2 or not all(np.isfinite(v) and v > 0 for v in forecast):
        raise InputError("simulate_point", f"returned {forecast!r} for {p['point_id']}",
                         "(ttft_s, tpot_s), both finite and > 0")
    rows = []
    for metric, pred in zip(("ttft", "tpot"), forecast, strict=True):
        measured = float(p[f"{metric}_s"])
        rows.append({"point_id": p["point_id"], "split": p["backend"],
                     "device": p["device"], "model": p["model"], "metric": metric,
                     "measured_s": measured, "forecast_s": float(pred),
                     "ape": abs(float(pred) / measured - 1.0)})
    return rows


GROUPINGS = ("model", "technique", "backend")


def point_technique(points: pd.DataFrame) -> pd.Series:
    """'<dense|moe>-<precision>[-disagg]' per point: the serving techniques a point
    exercises (MoE with EP/attention DP, quantisation, prefill/decode disaggregation)."""
    arch = points["arch"] if "arch" in points else pd.Series("dense", index=points.index)
    disagg = "-disagg" if "decode_tp" in points else ""
    return arch.astype(str) + "-" + points["precision"].astype(str) + disagg


def validate_serving(simulate_point: SimulatePoint | None = None,
                     points: pd.DataFrame | None = None, *, method: str | None = None,
                     overall: bool = True, by: str = "model",
                     progress: ProgressFn | None = None) -> pd.DataFrame:
    """Rows in the `validate_kernels` form — split (backend), device, group
    ('<model>/<ttft|tpot>', or '<technique>/<metric>' with by='technique'), method, mape
    (mean APE), median_ape, p90_ape (fractions), n — one per split x device x group x method;
    with by='backend' one per backend over every device (device 'all', group
    '<backend>/<metric>'); `overall` adds split='all', device='all', group='all/<metric>'
    rows (and per technique with by='technique'). Default callable:
    `analytic_point` with perfcast's kernel model (method 'sum_of_kernels'); pass `method` to
    name another callable. `progress(done, total)` is called after each point."""
    if by not in GROUPINGS:
        raise InputError("by", f"unknown grouping {by!r}", GROUPINGS)
    if method is None:
        method = "sum_of_kernels" if simulate_point is None else getattr(
            simulate_point, "__name__", "custom")
    points = load_serving_points() if points is None else points
    res = serving_residuals(simulate_point, points, progress)
    label = res["model"]
    if by == "technique":
        label = res["point_id"].map(dict(zip(points["point_id"], point_technique(points),
                                             strict=True)))
    if by == "backend":  # each backend over every device and model
        res = res.assign(group=res["split"] + "/" + res["metric"], device="all")
    else:
        res = res.assign(group=label + "/" + res["metric"])
    parts = [ape_summary(res, ["split", "device", "group"])]
    if overall and len(res):
        every = res.assign(split="all", device="all")
        if by == "technique":  # each technique over every backend and device
            parts.append(ape_summary(every, ["split", "device", "group"]))
        parts.append(ape_summary(every.assign(group="all/" + res["metric"]),
                          ["split", "device", "group"]))
    out = pd.concat(parts, ignore_index=True).assign(method=method)
    out = out[["split", "device", "group", "method", "mape", "median_ape", "p90_ape", "n"]]
    out.attrs["skipped"] = res.attrs["skipped"]
    return out
