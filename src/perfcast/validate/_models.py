"""Model-level accuracy: composed kernel forecasts against measured whole-model times.

Labels: NeuSight's measured FP32 eager PyTorch runs (BERT-Large, GPT-2 Large, GPT-3 XL/2.7B,
OPT-1.3B, Switch-XL4; inference and training; fused; 4-GPU DP/TP/PP), shipped as
validate/data/neusight_models.csv by scripts/build_model_labels.py. Nothing is fitted to them.

Methods per configuration:
  roofline             the eager kernel graph priced by the plain roofline, same composition
  sum_of_kernels       perfcast's per-kernel forecasts as isolated eager calls (what a kernel
                       benchmark times), summed: the usual "sum of operators" baseline
  sum_of_measured_ops  NeuSight's own per-op trace of one layer, scaled to all layers
                       (perfect kernels, naive composition; only where a trace exists)
  <tier>               perfcast: GPU kernel durations through the eager host->GPU queue,
                       named by the kernel tier the device gets (target_measured or
                       cross_generation)
  learned              the same `perfcast step` with --kernel-model learned (the trees of
                       perfcast.kernels._learned over the physical model); its interval is
                       the learned tier's

perfcast and roofline are `perfcast step` itself: each label becomes a `StepRequest` run
through `perfcast.api`, so this checks the command, not a copy of its composition.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import numpy as np
import pandas as pd

from perfcast.api import StepRequest, StepResult, run
from perfcast.compose import StepForecast
from perfcast.kernels import (
    PhysicsModel,
    RooflineModel,
    learned_time_model,
    shipped_calibration,
    step_interval,
)
from perfcast.ops import COMM_FAMILIES, eager_ops
from perfcast.progress import ProgressFn, offset
from perfcast.specs import Precision, get_device, get_model

__all__ = ["MODEL_TARGET_MAPE", "forecast_model_label", "load_layer_op_labels",
           "load_model_labels", "validate_models"]

MODEL_TARGET_MAPE = 0.06  # issue target, every device
FP32 = Precision.uniform("fp32")
_ROWS = ["split", "device", "group", "method", "mape", "p90_ape", "n", "coverage_90"]


@cache
def _csv(name: str) -> pd.DataFrame:
    with (resources.files("perfcast.validate") / "data" / name).open("rb") as f:
        return pd.read_csv(f, keep_default_na=False, na_values=[""])


def load_model_labels() -> pd.DataFrame:
    """One row per measured configuration (see validate/data/README.md)."""
    labels = _csv("neusight_models.csv").copy()
    labels["variant"] = labels["variant"].fillna("").astype(str)
    return labels


def load_layer_op_labels() -> pd.DataFrame:
    """Measured seconds per kernel family in layer 0 of each per-op trace."""
    return _csv("neusight_layer_ops.csv").copy()


def _layout(variant: str) -> dict[str, int]:
    """`perfcast step`'s tp / dp / pp of a label's variant suffix."""
    if variant == "tp4":
        return {"tp": 4}
    if variant == "dp4":
        return {"dp": 4}
    if variant.startswith("pp4"):
        return {"pp": 4}
    return {}


def _step_request(label: pd.Series | dict, kernel_model: str = "calibrated") -> StepRequest:
    """The `perfcast step` invocation one label row measured: FP32 eager on the legacy HF
    stack (materialised attention, PyTorch 1.x), its batch (global, across dp), sequence
    length, mode, fusion and parallel layout."""
    return StepRequest.from_options(
        model=label["model"], gpu=label["device"], batch=int(label["batch"]),
        seq_len=int(label["seq_len"]), mode=label["mode"], dtype="fp32", execution="eager",
        fused=label["variant"] == "fusion", kernel_model=kernel_model,
        stack="hf-transformers-legacy",
        **_layout(label["variant"]))


def forecast_model_label(label: pd.Series | dict, kernel_model: str = "calibrated"
                         ) -> StepResult:
    """`perfcast step` for one label row: `.time_s` the iteration (multi-GPU variants
    composed), `.step` one GPU's step."""
    return run(_step_request(label, kernel_model))


def _sum_of_kernels(step: StepForecast, model: PhysicsModel, label) -> float:
    ops = step.ops
    device = get_device(label["device"])
    eager = model.kernel_times(ops, device, np.full(len(ops), "eager", dtype=object))
    comm = ops["family"].isin(COMM_FAMILIES).to_numpy()
    return float(np.sum(np.where(comm, ops["time_s"], eager) * ops["count"]))


def _measured_ops(label) -> float:
    total, layer = label.get("trace_total_s"), label.get("trace_layer_s")
    if total is None or pd.isna(total) or not label["num_layers"]:
        return float("nan")
    return float(total + (label["num_layers"] - 1) * layer)


def _forecasts(labels: pd.DataFrame, progress: ProgressFn | None = None) -> pd.DataFrame:
    """Per label: each method's seconds; `progress(done, total)` after each label."""
    cal = shipped_calibration()
    physics = PhysicsModel(cal)
    out = []
    for done, (_, label) in enumerate(labels.iterrows(), start=1):
        tier = cal.tier_for(label["device"])
        result = forecast_model_label(label)
        t, step = result.time_s, result.step
        scale = t / step.time_s if step.time_s else 1.0
        device = get_device(label["device"])
        low, high = step_interval(step.ops, tier, device=device)
        learned = forecast_model_label(label, "learned")
        l_scale = learned.time_s / learned.step.time_s if learned.step.time_s else 1.0
        l_low, l_high = step_interval(learned.step.ops, _learned_tier(label), device=device)
        out.append({**label.to_dict(), "tier": tier, "perfcast_s": t,
                    "low_s": low * scale, "high_s": high * scale,
                    "learned_s": learned.time_s, "learned_low_s": l_low * l_scale,
                    "learned_high_s": l_high * l_scale,
                    "roofline_s": forecast_model_label(label, "roofline").time_s,
                    "sum_of_kernels_s": _sum_of_kernels(step, physics, label) * scale,
                    "sum_of_measured_ops_s": _measured_ops(label)})
        if progress is not None:
            progress(done, len(labels))
    return pd.DataFrame(out)


def _learned_tier(label) -> str:
    """The uncertainty tier of a label's learned forecast (kernels.LearnedTimeModel.tier)."""
    return learned_time_model().tier(get_device(label["device"]))


def _score(split: str, device: str, group: str, method: str, measured: np.ndarray,
           predicted: np.ndarray, covered: np.ndarray | None = None) -> dict | None:
    ok = np.isfinite(predicted) & np.isfinite(measured)
    if not ok.any():
        return None
    ape = np.abs(predicted[ok] - measured[ok]) / measured[ok]
    return {"split": split, "device": device, "group": group, "method": method,
            "mape": float(ape.mean()), "p90_ape": float(np.quantile(ape, 0.9)),
            "n": int(ok.sum()),
            "coverage_90": float(covered[ok].mean()) if covered is not None else float("nan")}


def _e2e_rows(f: pd.DataFrame) -> list[dict]:
    rows = []
    methods = {"roofline": "roofline_s", "sum_of_kernels": "sum_of_kernels_s",
               "sum_of_measured_ops": "sum_of_measured_ops_s"}
    for device, d in f.groupby("device", sort=True):
        for group, g in [("all", d), *d.groupby("model", sort=True)]:
            meas = g["e2e_s"].to_numpy(float)
            covered = (g["low_s"] <= g["e2e_s"]) & (g["e2e_s"] <= g["high_s"])
            rows.append(_score("models", device, group, g["tier"].iloc[0], meas,
                               g["perfcast_s"].to_numpy(float), covered.to_numpy()))
            covered = (g["learned_low_s"] <= g["e2e_s"]) & (g["e2e_s"] <= g["learned_high_s"])
            rows.append(_score("models", device, group, "learned", meas,
                               g["learned_s"].to_numpy(float), covered.to_numpy()))
            for method, col in methods.items():
                rows.append(_score("models", device, group, method, meas,
                                   g[col].to_numpy(float)))
    return [r for r in rows if r]


def _traced(labels: pd.DataFrame) -> pd.DataFrame:
    """The labels of one plain GPU (no parallel or fused variant) that have a per-op trace."""
    ops_labels = load_layer_op_labels()
    traced = set(zip(ops_labels["config"], ops_labels["device"], strict=True))
    single = labels[labels["variant"] == ""]
    keep = [key in traced for key in zip(single["config"], single["device"], strict=True)]
    return single[np.array(keep, dtype=bool)]


def _per_op_rows(labels: pd.DataFrame, progress: ProgressFn | None = None) -> list[dict]:
    """Per kernel family inside one layer: forecast (as isolated eager calls, the way the
    traces time each op) against the trace; `progress(done, total)` after each label."""
    ops_labels = load_layer_op_labels()
    physics, cal = PhysicsModel(shipped_calibration()), shipped_calibration()
    pred_rows = []
    traced = _traced(labels)
    for done, (_, label) in enumerate(traced.iterrows(), start=1):
        device = get_device(label["device"])
        ops = eager_ops(get_model(label["model"]), int(label["batch"]), int(label["seq_len"]),
                        label["mode"], FP32)
        ops = ops[ops["layer"] == "layer"]
        timing = np.full(len(ops), "eager", dtype=object)
        for method, model in (("roofline", RooflineModel()), (cal.tier_for(device.name),
                                                              physics),
                              ("learned", learned_time_model())):
            t = (model.kernel_times(ops, device, timing) if method != "roofline"
                 else model.kernel_times(ops, device))
            fam = ops.assign(t=t).groupby("family")["t"].sum()
            for family, sec in fam.items():
                pred_rows.append({"device": label["device"], "config": label["config"],
                                  "family": family, "method": method, "pred_s": float(sec)})
        if progress is not None:
            progress(done, len(traced))
    pred = pd.DataFrame(pred_rows)
    merged = pred.merge(ops_labels, on=["device", "config", "family"])
    rows = []
    for (device, family, method), g in merged.groupby(["device", "family", "method"]):
        rows.append(_score("per_op", device, family, method, g["layer_s"].to_numpy(float),
                           g["pred_s"].to_numpy(float)))
    return [r for r in rows if r]


def validate_models(labels: pd.DataFrame | None = None, per_op: bool = True,
                    progress: ProgressFn | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows {split, device, group, method, mape, p90_ape, n, coverage_90}, per-configuration
    forecasts). Split `models`: whole-model times; `per_op`: kernel families in one layer.
    `progress(done, total)` is called after each label forecast (and each per-op label)."""
    labels = load_model_labels() if labels is None else labels
    total = len(labels) + (len(_traced(labels)) if per_op else 0)
    forecasts = _forecasts(labels, offset(progress, 0, total))
    rows = _e2e_rows(forecasts) + (_per_op_rows(labels, offset(progress, len(labels), total))
                                   if per_op else [])
    return pd.DataFrame(rows, columns=_ROWS), forecasts
