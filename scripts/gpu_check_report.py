"""Price the kernels timed by scripts/gpu_stack_check.py on a real GPU and report the error.

A held-out check, never a fit: the `kernel_grid` rows of a stack_check JSON (today's PyTorch on
the GPU it ran on: F.linear, torch._scaled_mm, SDPA flash prefill and SDPA decode, each timed as
CUDA-graph replays) priced through `perfcast.api`'s kernel models for a stack, exactly as
`infer`/`step` price them: roofline, calibrated (the physical model) and learned (issue 18).

    python scripts/gpu_check_report.py docs/validation/gpu_check/h100_torch211_stack_check.json \
        --device h100-sxm --out docs/validation/gpu_check/h100_torch211.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.api import kernel_model
from perfcast.kernels import measurement_ops, stack_kernel_model
from perfcast.ops import FUSED_QUANT
from perfcast.specs import get_device, get_stack
from perfcast.validate._reports import md_table

METHODS = ("roofline", "calibrated", "learned")


def priced(rows: pd.DataFrame, device: str, stacks: list[str]) -> pd.DataFrame:
    """One row per (kernel row, stack, method): measured and forecast seconds."""
    spec = get_device(device)
    # torch._scaled_mm is handed fp8 inputs: the activation quantisation pass a W8A8 layer
    # runs is not in its time (perfcast's `:fused_quant` GEMM, kernels._physics)
    op = np.where(rows["dtype"] == "fp8", rows["op"] + ":" + FUSED_QUANT, rows["op"])
    ops = measurement_ops(rows.assign(op=op, weight_dtype=rows["dtype"], kv_dtype=""))
    out = []
    for stack in stacks:
        for method in METHODS:
            model, _ = kernel_model(method, None, spec)
            model = stack_kernel_model(get_stack(stack), model)
            out.append(pd.DataFrame({
                "family": rows["family"].to_numpy(), "dtype": rows["dtype"].to_numpy(),
                "stack": stack, "method": method,
                "measured_s": rows["latency_s"].to_numpy(dtype=float),
                "forecast_s": np.asarray(model.kernel_times(ops, spec), dtype=float)}))
    return pd.concat(out, ignore_index=True)


def summary(table: pd.DataFrame) -> pd.DataFrame:
    ape = (table["forecast_s"] - table["measured_s"]).abs() / table["measured_s"]
    bias = np.log(table["forecast_s"] / table["measured_s"])
    t = table.assign(ape=ape, log_bias=bias, group=table["family"] + "/" + table["dtype"])
    return t.groupby(["stack", "group", "method"], sort=True).agg(
        n=("ape", "size"), mape=("ape", "mean"), median_ape=("ape", "median"),
        median_ratio=("log_bias", lambda x: float(np.exp(np.median(x))))).reset_index()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("check", type=Path)
    parser.add_argument("--device", required=True, help="perfcast device name of the GPU")
    parser.add_argument("--stacks", default="hf-transformers,trtllm")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    data = json.loads(args.check.read_text())
    rows = pd.DataFrame([r for r in data["rows"] if r.get("what") == "kernel_grid"
                         and r.get("latency_s")])
    table = summary(priced(rows, args.device, args.stacks.split(",")))
    text = "\n".join([
        f"# Kernel forecasts against a real {data['meta']['device']}", "",
        f"Measured with scripts/gpu_stack_check.py (torch {data['meta']['torch']}, "
        f"{data['meta'].get('kernel_grid_timing', '')}); never fitted. Priced by "
        "scripts/gpu_check_report.py through `perfcast.api.kernel_model` and the stack's "
        "kernel routing. median_ratio: median forecast / measured.", "",
        md_table(table), ""])
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
