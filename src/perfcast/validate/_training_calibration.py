"""A training-stack calibration, fitted on MosaicML's measured grid and scored held out.

perfcast's kernel model is calibrated on kernel benchmarks; a training stack (here MosaicML
llm-foundry: eager PyTorch, FSDP, triton/flash attention, 2023) reaches less. Three numbers,
shared by every GPU generation, describe how much less (perfcast.train._stack, schema 2):
`other` for every non-attention kernel (GEMMs, norms, activations, the optimizer),
`attention` for the attention kernels on the architecture they were written for (times
LEGACY_ATTENTION on a newer one), and `overlap_loss` per second of communication the
forecast hides under compute. A forecast's iteration is then other x (non-attention
seconds) + attention x penalty x (attention seconds) + overlap_loss x (hidden communication
seconds) + the rest (exposed communication, bubble, SM contention), its own breakdown scaled
(`StackScaled` and `CommOverlap` are that model). Factors are fitted by least squares on
log(forecast / measured) and judged on rows left out of the fit: the other generation
(`heldout_device`) or every other model's rows on both generations (`heldout_model`).
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
    attention_penalty,
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
KERNEL_ARCH = "Ampere"  # llm-foundry's 2023 attention kernels (triton / FlashAttention-2)


def generation(cluster_device: str) -> str:
    """'a100' / 'h100' from a catalog device name (the factor table's key)."""
    return cluster_device.split("-", 1)[0]


def kernel_split(points: pd.DataFrame, time_model: ExecutionTimeModel,
                 progress: ProgressFn | None = None) -> pd.DataFrame:
    """Per point, from `forecast_training` with `time_model`: the iteration, its attention
    kernel seconds (a second forecast pricing only attention), the other scalable seconds
    (compute + optimizer - attention), the communication hidden under compute, the rest
    (exposed comm, bubble, contention), the stack's attention penalty on the point's GPU
    and its own MFU. `progress(done, total)` is called after each point."""
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
            "hidden_s": fc.breakdown["hidden_comm_s"],
            "fixed_s": fc.iteration_time_s - scalable, "mfu": fc.mfu,
            "penalty": attention_penalty(device.arch, KERNEL_ARCH),
            "measured_s": job.tokens / (float(p["tokens_per_s_per_gpu"]) * job.plan.num_gpus)})
        if progress is not None:
            progress(done, len(points))
    return pd.DataFrame(rows)


def scaled_seconds(split: pd.DataFrame, other: np.ndarray | float,
                   attention: np.ndarray | float,
                   overlap_loss: np.ndarray | float = 0.0) -> np.ndarray:
    """Iteration seconds with the kernel classes scaled and the stack's overlap loss on the
    hidden communication (the rest held as forecast)."""
    return (other * split["other_s"].to_numpy()
            + attention * split["penalty"].to_numpy() * split["attention_s"].to_numpy()
            + overlap_loss * split["hidden_s"].to_numpy() + split["fixed_s"].to_numpy())


FACTORS = ("other", "attention", "overlap_loss")


def fit_stack_factors(split: pd.DataFrame) -> tuple[float, float, float]:
    """(other, attention, overlap_loss) minimising the squared log error of the iteration
    time; the factors positive, the loss >= 0."""
    if split.empty:
        raise InputError("points", "no rows to fit the stack factors on", ">= 2 points")

    def residual(x: np.ndarray) -> np.ndarray:
        seconds = scaled_seconds(split, np.exp(x[0]), np.exp(x[1]), x[2] ** 2)
        return np.log(seconds / split["measured_s"].to_numpy())

    x = least_squares(residual, np.array([0.0, 0.0, 0.5])).x
    return float(np.exp(x[0])), float(np.exp(x[1])), float(x[2] ** 2)


def _groups(split: pd.DataFrame, scheme: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """(fit mask, test mask) pairs of a held-out scheme; every row is tested exactly once."""
    if scheme == "heldout_device":
        gen = split["generation"].to_numpy()
        return [(gen != g, gen == g) for g in np.unique(gen)]
    if scheme == "heldout_model":
        model = split["model"].to_numpy()
        return [(model != m, model == m) for m in np.unique(model)]
    raise InputError("split", f"unknown held-out scheme {scheme!r}", SCHEMES)


def heldout_factors(split: pd.DataFrame, scheme: str) -> pd.DataFrame:
    """Per row, the stack factors fitted on the rows `scheme` leaves it out of."""
    out = pd.DataFrame({"point_id": split["point_id"], **{f: np.nan for f in FACTORS}})
    for fit_rows, test_rows in _groups(split, scheme):
        out.loc[test_rows, list(FACTORS)] = fit_stack_factors(split[fit_rows])
    return out


def _heldout_seconds(split: pd.DataFrame, scheme: str) -> np.ndarray:
    f = heldout_factors(split, scheme)
    return scaled_seconds(split, *(f[k].to_numpy() for k in FACTORS))


def heldout_mape(split: pd.DataFrame, scheme: str) -> dict[str, float]:
    """Tokens/s MAPE of the held-out `perfcast` forecasts per GPU generation and overall,
    and the share of rows forecast too fast (`under_predicted`: measured slower)."""
    seconds = _heldout_seconds(split, scheme)
    measured = split["measured_s"].to_numpy()
    ape = pd.Series(np.abs(measured / seconds - 1.0))
    out = ape.groupby(split["generation"].to_numpy()).mean().round(4).to_dict()
    return {**out, "all": round(float(ape.mean()), 4),
            "under_predicted": round(float((seconds < measured).mean()), 4)}


def calibration_document(split: pd.DataFrame) -> dict:
    """The shipped JSON (schema 2): the factors fitted on every point, with provenance and
    the tokens/s MAPE each held-out scheme scores."""
    factors = dict(zip(FACTORS, (round(v, 4) for v in fit_stack_factors(split)), strict=True))
    factors.update(points=len(split), archs=sorted(split["arch"].unique()),
                   models=sorted(split["model"].unique()))
    return {"schema": 2, "stack": "MosaicML llm-foundry (PyTorch FSDP, triton/flash "
            "attention; scripts/train/benchmarking/README.md @4952183)",
            "model": "iteration = other x (non-attention kernel + optimizer seconds) + "
                     "attention x penalty x (attention kernel seconds) + overlap_loss x "
                     "(communication hidden under compute) + the rest (exposed comm, bubble, "
                     "SM contention), on perfcast's shipped calibrated kernel model "
                     "(perfcast.train.StackScaled, CommOverlap); penalty: "
                     "perfcast.train.LEGACY_ATTENTION on GPUs newer than "
                     "attention_kernel_arch",
            "fit": "scipy least_squares on log(forecast / measured iteration time), all GPU "
                   "generations at once, on all points of validate/data/training_points.json",
            "attention_kernel_arch": KERNEL_ARCH,
            "factors": factors,
            "heldout_tokens_per_s_mape": {s: heldout_mape(split, s) for s in SCHEMES},
            "use": "perfcast train --stack llm-foundry (perfcast.train.stack_time_model, "
                   "stack_overlap): GPUs of attention_kernel_arch or of an architecture "
                   "LEGACY_ATTENTION has a penalty for",
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
        seconds = _heldout_seconds(split, scheme)
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
