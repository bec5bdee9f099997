"""A training-stack calibration, fitted on MosaicML's measured grid and scored held out.

perfcast's kernel model is calibrated on kernel benchmarks; a training stack (here MosaicML
llm-foundry: eager PyTorch, FSDP, triton/flash attention, 2023) reaches less. Two time factors
per GPU generation describe how much less: `other` for every non-attention kernel (GEMMs,
norms, activations, the optimizer) and `attention` for the attention kernels. A forecast's
iteration is then other x (non-attention seconds) + attention x (attention seconds) +
exposed communication, its own breakdown with the two kernel classes scaled (`StackScaled`
is that time model). Factors are fitted by least squares on log(forecast / measured) and
judged on rows left out of the fit: the other generation (`heldout_device`) or the same
generation's other models (`heldout_model`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from perfcast.errors import InputError
from perfcast.kernels import ExecutionTimeModel
from perfcast.progress import ProgressFn, offset
from perfcast.train import (
    ATTENTION_FAMILIES,
    StackScaled,
    default_time_model,
    forecast_training,
    load_stack,
)
from perfcast.validate._training import (
    TRAINING_METHODS,
    ForecastPoint,
    load_training_points,
    roofline_point,
    summarise_training,
    training_job,
    training_residuals,
)

__all__ = ["ATTENTION_FAMILIES", "SCHEMES", "StackScaled", "fit_stack_factors",
           "heldout_factors", "kernel_split", "load_training_calibration", "method_table",
           "scaled_seconds", "validate_training"]

SCHEMES = ("heldout_device", "heldout_model")


def generation(cluster_device: str) -> str:
    """'a100' / 'h100' from a catalog device name (the factor table's key)."""
    return cluster_device.split("-", 1)[0]


def kernel_split(points: pd.DataFrame, time_model: ExecutionTimeModel,
                 progress: ProgressFn | None = None) -> pd.DataFrame:
    """Per point, from `forecast_training` with `time_model`: the iteration, its attention
    kernel seconds (a second forecast pricing only attention), the other scalable seconds
    (compute + optimizer - attention), the rest (exposed comm, bubble), and its own MFU.
    `progress(done, total)` is called after each point."""
    only_attention = StackScaled(time_model, attention=1.0, other=0.0)
    rows = []
    for done, (_, p) in enumerate(points.iterrows(), start=1):
        job = training_job(p)
        fc = forecast_training(job, time_model=time_model)
        attention = forecast_training(job, time_model=only_attention).breakdown["compute_s"]
        scalable = fc.breakdown["compute_s"] + fc.breakdown["optimizer_s"]
        device = job.cluster.device
        rows.append({"point_id": p["point_id"], "generation": generation(device.name),
            "arch": device.arch, "model": p["model"], "iteration_s": fc.iteration_time_s,
            "attention_s": attention, "other_s": scalable - attention,
            "fixed_s": fc.iteration_time_s - scalable, "mfu": fc.mfu,
            "measured_s": job.tokens / (float(p["tokens_per_s_per_gpu"]) * job.plan.num_gpus)})
        if progress is not None:
            progress(done, len(points))
    return pd.DataFrame(rows)


def scaled_seconds(split: pd.DataFrame, other: np.ndarray | float,
                   attention: np.ndarray | float) -> np.ndarray:
    """Iteration seconds with the kernel classes scaled (exposed comm held as forecast)."""
    return (other * split["other_s"].to_numpy() + attention * split["attention_s"].to_numpy()
            + split["fixed_s"].to_numpy())


def fit_stack_factors(split: pd.DataFrame) -> tuple[float, float]:
    """(other, attention) minimising the squared log error of the iteration time."""
    if split.empty:
        raise InputError("points", "no rows to fit the stack factors on", ">= 2 points")

    def residual(log_k: np.ndarray) -> np.ndarray:
        k = np.exp(log_k)
        return np.log(scaled_seconds(split, k[0], k[1]) / split["measured_s"].to_numpy())

    k = np.exp(least_squares(residual, np.zeros(2)).x)
    return float(k[0]), float(k[1])


def _groups(split: pd.DataFrame, scheme: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """(fit mask, test mask) pairs of a held-out scheme; every row is tested exactly once."""
    gen = split["generation"].to_numpy()
    if scheme == "heldout_device":
        return [(gen != g, gen == g) for g in np.unique(gen)]
    if scheme == "heldout_model":
        model = split["model"].to_numpy()
        return [((gen == g) & (model != m), (gen == g) & (model == m))
                for g in np.unique(gen) for m in np.unique(model[gen == g])]
    raise InputError("split", f"unknown held-out scheme {scheme!r}", SCHEMES)


def heldout_factors(split: pd.DataFrame, scheme: str) -> pd.DataFrame:
    """Per row, the (other, attention) factors fitted on the rows `scheme` leaves it out of."""
    out = pd.DataFrame({"point_id": split["point_id"], "other": np.nan, "attention": np.nan})
    for fit_rows, test_rows in _groups(split, scheme):
        other, attention = fit_stack_factors(split[fit_rows])
        out.loc[test_rows, ["other", "attention"]] = other, attention
    return out


def heldout_mape(split: pd.DataFrame, scheme: str) -> dict[str, float]:
    """Tokens/s MAPE of the held-out `perfcast` forecasts per GPU generation and overall."""
    f = heldout_factors(split, scheme)
    seconds = scaled_seconds(split, f["other"].to_numpy(), f["attention"].to_numpy())
    ape = pd.Series(np.abs(split["measured_s"].to_numpy() / seconds - 1.0))
    out = ape.groupby(split["generation"].to_numpy()).mean().round(4).to_dict()
    return {**out, "all": round(float(ape.mean()), 4)}


def calibration_document(split: pd.DataFrame) -> dict:
    """The shipped JSON: factors per GPU generation fitted on all of its points, with
    provenance and the tokens/s MAPE each held-out scheme scores."""
    factors = {}
    for gen, rows in split.groupby("generation"):
        other, attention = fit_stack_factors(rows)
        (arch,) = rows["arch"].unique()  # one architecture per fitted GPU generation
        factors[gen] = {"arch": arch,
                        "other": round(other, 4), "attention": round(attention, 4),
                        "points": len(rows), "models": sorted(rows["model"].unique())}
    return {"schema": 1, "stack": "MosaicML llm-foundry (PyTorch FSDP, triton/flash "
            "attention; scripts/train/benchmarking/README.md @4952183)",
            "model": "iteration = other x (non-attention kernel + optimizer seconds) + "
                     "attention x (attention kernel seconds) + exposed comm, on perfcast's "
                     "shipped calibrated kernel model (perfcast.train.StackScaled)",
            "fit": "scipy least_squares on log(forecast / measured iteration time), per GPU "
                   "generation, on all points of validate/data/training_points.json",
            "factors": factors,
            "heldout_tokens_per_s_mape": {s: heldout_mape(split, s) for s in SCHEMES},
            "use": "perfcast train --stack llm-foundry (perfcast.train.stack_time_model): "
                   "the factors of the fitted GPU of the device's architecture; other "
                   "architectures have none",
            "built_by": "perfcast.validate._training_calibration.calibration_document"}


def load_training_calibration() -> dict:
    """The shipped llm-foundry stack factors (train/data/stack_llm_foundry.json, the
    `perfcast train --stack llm-foundry` profile)."""
    return load_stack("llm-foundry")


def _tokens_per_gpu(points: pd.DataFrame, seconds: np.ndarray) -> np.ndarray:
    tokens = points["global_batch"].to_numpy() * points["seq_len"].to_numpy()
    return tokens / seconds / points["num_gpus"].to_numpy()


def method_table(points: pd.DataFrame, split: pd.DataFrame, scheme: str | None
                 ) -> dict[str, dict[str, tuple[float, float]]]:
    """(tokens/s per GPU, own MFU) per point of `sum_of_kernels` and, under a held-out
    `scheme`, `perfcast`: the same forecast with stack factors fitted without the point."""
    base_s = split["iteration_s"].to_numpy()
    out = {"sum_of_kernels": dict(zip(split["point_id"], zip(
        _tokens_per_gpu(points, base_s), split["mfu"], strict=True), strict=True))}
    if scheme is not None:
        f = heldout_factors(split, scheme)
        seconds = scaled_seconds(split, f["other"].to_numpy(), f["attention"].to_numpy())
        mfu = split["mfu"].to_numpy() * base_s / seconds
        out["perfcast"] = dict(zip(split["point_id"], zip(
            _tokens_per_gpu(points, seconds), mfu, strict=True), strict=True))
    return out


def _roofline_table(points: pd.DataFrame, progress: ProgressFn | None
                    ) -> dict[str, tuple[float, float]]:
    """point_id -> the roofline baseline's (tokens/s per GPU, MFU); progress per point."""
    table = {}
    for done, (_, p) in enumerate(points.iterrows(), start=1):
        table[p["point_id"]] = roofline_point(p)
        if progress is not None:
            progress(done, len(points))
    return table


def validate_training(forecast_point: ForecastPoint | None = None,
                      points: pd.DataFrame | None = None, *, method: str | None = None,
                      split: str = "all", methods: tuple[str, ...] | None = None,
                      splits: tuple[str, ...] | None = None,
                      kernels: pd.DataFrame | None = None,
                      progress: ProgressFn | None = None) -> pd.DataFrame:
    """Rows in the `validate_kernels` form — split, device, group, method, mape, median_ape,
    p90_ape (fractions), n, and `by` (metric / scale / model). With a callable: its rows
    (method `method`, split `split`). Without: `methods` (default all of TRAINING_METHODS) on
    `splits` (default 'all' and both held-out schemes): `roofline`, `sum_of_kernels` (the
    shipped calibrated kernels and default collectives) on every split, and `perfcast`
    (sum_of_kernels with training-stack factors fitted without the scored point) on the
    held-out ones. `kernels`: the points' `kernel_split`, when already computed.
    `progress(done, total)` is called after each point forecast (roofline, then the kernel
    split), the forecasts being what takes the time."""
    if forecast_point is not None:
        name = method or getattr(forecast_point, "__name__", "custom")
        res = training_residuals(forecast_point, points)
        out = summarise_training(res, split, name)
        out.attrs["skipped"] = res.attrs["skipped"]
        return out
    points = load_training_points() if points is None else points.reset_index(drop=True)
    methods, splits = methods or TRAINING_METHODS, splits or ("all", *SCHEMES)
    tables = {}
    roofline = "roofline" in methods
    to_split = kernels is None and bool(set(methods) - {"roofline"})
    before = len(points) if roofline else 0  # the roofline forecasts come first
    total = before + (len(points) if to_split else 0)
    if roofline:
        tables["roofline"] = _roofline_table(points, offset(progress, 0, total))
    if to_split:
        kernels = kernel_split(points, default_time_model(),
                               offset(progress, before, total))
    parts = []
    for name in splits:
        table = {**tables, **({} if kernels is None else method_table(
            points, kernels, None if name == "all" else name))}
        for m in (m for m in methods if m in table):
            rows = training_residuals(lambda p, t=table[m]: t[p["point_id"]], points)
            parts.append(summarise_training(rows, name, m))
    if not parts:  # e.g. perfcast alone on split 'all', where nothing is held out
        raise InputError("method", f"no rows for methods {methods} on splits {splits}",
                         "perfcast only with a held-out split")
    return pd.concat(parts, ignore_index=True)
