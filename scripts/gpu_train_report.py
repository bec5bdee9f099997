"""Price the training iterations timed by scripts/gpu_train_check.py and report the error.

A held-out check, never a fit: each `train_llm` / `train_resnet` row (today's PyTorch and
transformers on the GPU it ran on, one GPU, random weights) is asked of `perfcast train`
through `perfcast.api.run_options`, exactly as the CLI asks it, with the calibrated kernel
model and with the plain roofline beside it; the profile rows' kernel seconds are summed by
kind so the table says where the measured time went.

    python scripts/gpu_train_report.py docs/validation/gpu_check/h100_train_check.json \
        docs/validation/gpu_check/h100_train_profile.json --device h100-sxm \
        --out docs/validation/gpu_check/h100_train.md [--csv out.csv]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.api import run_options
from perfcast.validate._reports import md_table

METHODS = ("calibrated", "roofline")
# the check's training recipes as perfcast's memory presets: its AMP is torch.autocast over
# fp32 parameters (torch-amp); pure bf16 keeps bf16 parameters and moments
POLICIES = {"amp": "torch-amp", "pure-bf16": "pure-bf16"}
KEYS = ("what", "model", "policy", "precision", "micro_batch", "seq_len", "recompute",
        "channels_last", "heldout")


def measured(paths: list[Path]) -> pd.DataFrame:
    """One row per timed case: the median of its runs' median iteration seconds, the largest
    peak of allocated bytes, and how many runs timed it."""
    rows = [r for p in paths for r in json.loads(p.read_text())["rows"]
            if r.get("what") in ("train_llm", "train_resnet") and "iteration_s" in r]
    table = pd.DataFrame(rows)
    for key in KEYS:
        if key not in table:
            table[key] = None
    table = table.astype({k: object for k in KEYS}).fillna({k: "" for k in KEYS})
    # which held-out set a row belongs to: 0 seen while modelling, 1 or 2 (True: 1)
    table["heldout"] = [int(h) if h != "" else 0 for h in table["heldout"]]
    return (table.groupby(list(KEYS), sort=False)
            .agg(measured_s=("iteration_s", "median"), runs=("iteration_s", "size"),
                 peak_allocated_bytes=("peak_allocated_bytes", "max"))
            .reset_index())


def _options(row: pd.Series, device: str, method: str, stack: str) -> dict:
    if row["what"] == "train_resnet":
        dtype = "bf16" if row["precision"] == "bf16" else "fp32"
        return {"model": "resnet50", "gpu": device, "num_gpus": 1,
                "micro_batch": int(row["micro_batch"]), "dtype": dtype,
                "kernel_model": method}
    return {"model": row["model"], "gpu": device, "num_gpus": 1,
            "micro_batch": int(row["micro_batch"]), "seq_len": int(row["seq_len"]),
            "dtype": "bf16",
            "recompute": row["recompute"], "memory_policy": POLICIES[row["policy"]],
            "stack": stack,
            "kernel_model": method, "allow_oom": True}


def priced(table: pd.DataFrame, device: str, stack: str) -> pd.DataFrame:
    """The measured table with each method's forecast seconds (and the calibrated memory)."""
    out = table.copy()
    for method in METHODS:
        seconds, memory = [], []
        for _, row in table.iterrows():
            payload = run_options("train", _options(row, device, method, stack)).payload()
            seconds.append(payload["iteration_time_s"])
            memory.append(payload.get("memory_per_gpu_bytes", np.nan))
        out[f"{method}_s"] = seconds
        if method == "calibrated":
            out["forecast_memory_bytes"] = memory
    return out


def _kind(name: str) -> str | None:
    """A kernel name's kind (None: a profiler annotation, not a kernel)."""
    rules = (("Optimizer.step", None), ("FusedOptim|multi_tensor_apply|SGD", "optimizer"),
             ("sdpa|flash|fmha", "attention"),
             ("fprop|dgrad|wgrad|implicit_gemm|conv", "conv"),
             ("nvjet|xmma_gemm|s16816gemm|gemm", "gemm"), ("SoftMax|softmax", "softmax"),
             ("bn_|batch_norm", "norm"),
             ("copy|Memcpy|nchwToNhwc|nhwcToNchw", "copy/cast"))
    for pattern, kind in rules:
        if re.search(pattern, name):
            return kind
    return "elementwise"


def profile_table(paths: list[Path]) -> pd.DataFrame:
    """Measured milliseconds per iteration by kernel kind, GPU busy and wall, per case."""
    rows = []
    for path in paths:
        for r in json.loads(path.read_text())["rows"]:
            if not str(r.get("what", "")).startswith("profile_") or "kernels" not in r:
                continue
            kinds: dict[str, float] = {}
            for k in r["kernels"]:
                kind = _kind(k["name"])
                if kind is not None:
                    kinds[kind] = kinds.get(kind, 0.0) + 1e3 * k["s"]
            case = f"{r['model']} {r.get('policy') or r.get('precision')} mb{r['micro_batch']}"
            rows.append({"case": case, "wall_ms": 1e3 * r["wall_s"],
                         "gpu_busy_ms": 1e3 * r["gpu_busy_s"],
                         "host_enqueue_ms": 1e3 * r["enqueue_s"],
                         **{k: round(v, 2) for k, v in sorted(kinds.items())}})
    return pd.DataFrame(rows).fillna(0.0)


def expressible(table: pd.DataFrame) -> pd.Series:
    """Rows `perfcast train` can be asked for: not strict fp32 (cudnn.allow_tf32 off) nor
    channels_last, which are no options (they are listed, not scored)."""
    return (table["precision"] != "fp32-strict") & (table["channels_last"] != True)  # noqa: E712


def summary(table: pd.DataFrame) -> pd.DataFrame:
    rows = []
    table = table[expressible(table)]
    for (what, heldout), group in table.groupby(["what", "heldout"], sort=False):
        for method in METHODS:
            ape = (group[f"{method}_s"] - group["measured_s"]).abs() / group["measured_s"]
            label = {0: "", 1: " (held out)"}.get(heldout, f" (held out, set {heldout})")
            rows.append({"rows": what + label, "method": method,
                         "n": len(group), "too_fast": int((group[f"{method}_s"]
                                                           < group["measured_s"]).sum()),
                         "mape": ape.mean(), "median_ape": ape.median(),
                         "median_ratio": (group[f"{method}_s"] / group["measured_s"]).median()})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checks", type=Path, nargs="+")
    parser.add_argument("--device", default="h100-sxm")
    parser.add_argument("--stack", default="hf-transformers")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--csv", type=Path)
    args = parser.parse_args()
    table = priced(measured(args.checks), args.device, args.stack)
    if args.csv:
        table.to_csv(args.csv, index=False)
    meta = json.loads(args.checks[0].read_text())["meta"]
    cases = table.assign(
        measured_ms=1e3 * table["measured_s"], forecast_ms=1e3 * table["calibrated_s"],
        roofline_ms=1e3 * table["roofline_s"],
        ratio=table["calibrated_s"] / table["measured_s"],
        peak_gb=table["peak_allocated_bytes"] / 1e9,
        forecast_gb=table["forecast_memory_bytes"] / 1e9)
    cols = ["what", "model", "policy", "precision", "channels_last", "micro_batch",
            "seq_len", "recompute", "heldout", "runs", "measured_ms", "forecast_ms",
            "roofline_ms", "ratio", "peak_gb", "forecast_gb"]
    text = [f"# `perfcast train` against training iterations on a real {meta['device']}", "",
            f"Measured with scripts/gpu_train_check.py (torch {meta['torch']}; "
            f"{meta['timing']}; median of each run's median, {len(args.checks)} runs); never "
            f"fitted. Priced by scripts/gpu_train_report.py: `perfcast train --gpu "
            f"{args.device} --num-gpus 1 --stack {args.stack}` (LLMs) with the case's "
            "micro-batch, memory policy and recomputation; ResNet-50 as `train --model "
            "resnet50 --dtype fp32|bf16` (channels_last and strict fp32 are not options: "
            "listed, not scored). "
            "peak_gb: torch.cuda.max_memory_allocated; forecast_gb: memory_per_gpu_bytes.", "",
            md_table(summary(table)), "", md_table(cases[cols]), "",
            "## Where the measured time went (torch.profiler, ms per iteration)", "",
            md_table(profile_table(args.checks)), ""]
    args.out.write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
