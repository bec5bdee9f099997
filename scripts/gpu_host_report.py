"""Hold perfcast's hf-transformers forecasts against scripts/gpu_host_check.py's whole steps.

A held-out check, never a fit: each `prefill` row is priced as `perfcast step --mode forward
--logits last`, each `generate_token` row as `perfcast infer --stack hf-transformers`'s TPOT
(generate()'s decode step plus its per-token host work), on the GPU the check ran on.

    python scripts/gpu_host_report.py docs/validation/gpu_check/h100_host_check.json \
        --gpu h100-sxm [--out docs/validation/gpu_check/gpu_host.md] [--host-speed X]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.api import InferRequest, StepRequest, kernel_model, run
from perfcast.kernels import stack_kernel_model
from perfcast.ops import eager_ops
from perfcast.specs import Precision, get_device, get_model, get_stack
from perfcast.validate._reports import md_table

BF16 = Precision(weights="bf16", activations="bf16", kv_cache="bf16")
# gpu_host_check.py's hf_vectors modules -> their rows in perfcast's Llama-2-7B layer
MODULE_OPS = {"rms_norm": r":ln_1\.", "rotary_qk": r":rope_[qk]\.",
              "silu_mul": r"^(?:silu:silu|mul:gate_mul)$", "residual_add": r"^add:attn_residual$"}


def forecast_s(row: dict, gpu: str, stack: str, host_speed: float | None
               ) -> tuple[float, float, float]:
    """(forecast, 90% low, 90% high) seconds of one measured row."""
    speed = {} if host_speed is None else {"host_speed": host_speed}
    if row["what"] == "prefill":
        req = StepRequest.from_options(model=row["model"], gpu=gpu, mode="forward",
                                       batch=row["batch"], seq_len=row["seq"], logits="last",
                                       dtype="bf16", stack=stack, **speed)
        step = run(req).step
        return step.time_s, *step.interval_s
    req = InferRequest.from_options(model=row["model"], gpu=gpu, batch=row["batch"],
                                    prompt_tokens=row["context"], output_tokens=64,
                                    dtype="bf16", stack=stack, **speed)
    f = run(req).forecast
    return f.tpot_s, *f.intervals_s()["tpot_s"]


def table(path: Path, gpu: str, stack: str, host_speed: float | None) -> pd.DataFrame:
    rows = [r for r in json.loads(path.read_text())["rows"]
            if r["what"] in ("prefill", "generate_token")]
    out = []
    for r in rows:
        time_s, low, high = forecast_s(r, gpu, stack, host_speed)
        out.append({"case": r["what"], "model": r["model"], "batch": r["batch"],
                    "tokens": r.get("seq", r.get("context")), "measured_ms": r["wall_s"] * 1e3,
                    "forecast_ms": time_s * 1e3, "low_ms": low * 1e3, "high_ms": high * 1e3,
                    "in_90": bool(low <= r["wall_s"] <= high)})
    out = pd.DataFrame(out)
    out["ratio"] = out["forecast_ms"] / out["measured_ms"]
    return out


def vectors(path: Path, gpu: str, stack: str) -> pd.DataFrame:
    """transformers' Llama modules between the GEMMs (GPU seconds, CUDA-graph replay) against
    the sum of their rows in perfcast's eager op table, per kernel model. `residual_add` was
    timed as x + x, which reads one tensor: a floor, not the add of two."""
    device, spec = get_device(gpu), get_model("llama-2-7b")
    models = {m: stack_kernel_model(get_stack(stack), kernel_model(m, None, device)[0])
              for m in ("roofline", "calibrated")}
    out = []
    for r in json.loads(path.read_text())["rows"]:
        if r["what"] != "vector_module":
            continue
        ops = eager_ops(spec, 1, r["tokens"], "forward", BF16, attention="sdpa")
        ops = ops[(ops["layer"] == "layer") & ops["op"].str.contains(MODULE_OPS[r["module"]])]
        row = {"module": r["module"], "tokens": r["tokens"], "kernels": int(len(ops)),
               "measured_us": r["gpu_s"] * 1e6}
        for name, model in models.items():
            row[f"{name}_us"] = float(np.sum(model.kernel_times(ops, device))) * 1e6
        out.append(row)
    return pd.DataFrame(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("check", type=Path)
    parser.add_argument("--gpu", default="h100-sxm")
    parser.add_argument("--stack", default="hf-transformers")
    parser.add_argument("--host-speed", type=float, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    t = table(args.check, args.gpu, args.stack, args.host_speed)
    ape = (t["ratio"] - 1).abs()
    lines = [md_table(t.round(3)), "",
             f"MAPE {ape.mean():.3f}, median APE {ape.median():.3f}, "
             f"median ratio {np.exp(np.log(t['ratio']).median()):.3f}, "
             f"90% interval coverage {t['in_90'].mean():.2f}; by case: "
             + ", ".join(f"{c} {g.mean():.3f}" for c, g in ape.groupby(t["case"]))]
    v = vectors(args.check, args.gpu, args.stack)
    if len(v):
        ratio = {m: v[f"{m}_us"] / v["measured_us"] for m in ("roofline", "calibrated")}
        lines += ["", "Vector modules (GPU time per call, no host):", "", md_table(v.round(1)), "",
                  "; ".join(f"{m}: MAPE {(r - 1).abs().mean():.3f}, median ratio "
                            f"{np.exp(np.log(r).median()):.3f}" for m, r in ratio.items())]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
