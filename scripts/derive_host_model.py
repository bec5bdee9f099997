"""Derive the hf-transformers stack's host model from a measured host probe.

The probe (perfcast.measure._host_probe, run on a GPU host by scripts/gpu_host_check.py)
times hidden-64 Llama models, whose kernels take no time, so each time is host work:
  forward_s[L]        a 16-token forward with last-token logits, L = 1 and 5 layers
  generate_token_s[L] generate()'s seconds per new token
Their per-layer slopes over perfcast's own kernels per layer give the host seconds per eager
kernel, pooled over both (op_dispatch_s); what the forward costs beyond perfcast's
embedding and head kernels is step_s (causal mask, rotary tables, input preparation); what a
generate() token costs beyond a decode forward is generate_s. The probe's CPU-only run on the
same host is kept beside it: the reference that `--host-speed` of another host is relative to.
The CUDA probes of other GPU hosts (`--hosts`) give `spread`: the largest factor by which a
measured host's per-layer host time differs from the reference, either way (low = 1/high),
which widens the 90% intervals of host-bound forecasts.

A training probe (`--train-probe`, scripts/gpu_train_check.py's host_train_probe part:
hidden-64 Llamas of 1 and 5 layers, forward + backward + fused AdamW, AMP and pure bf16) gives
the eager stacks' training host model the same way: the per-layer slopes over perfcast's own
training kernels per layer (autocast for AMP, Adam included) -> train_dispatch_s; what a
1-layer iteration costs beyond one layer and perfcast's kernels outside the layers ->
train_step_s (the mean over both policies).

    python scripts/derive_host_model.py --probe docs/validation/gpu_check/h100_host_check.json \
        --hosts docs/validation/gpu_check/h200_host_check.json \
        docs/validation/gpu_check/h100b_host_check.json
    python scripts/derive_host_model.py \
        --train-probe docs/validation/gpu_check/h100_train_probe.json
    python scripts/derive_host_model.py --check    # the shipped files match the derivation
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from perfcast.ops import eager_ops
from perfcast.specs import ModelSpec, Precision

ROOT = Path(__file__).resolve().parents[1]
HOST_JSON = ROOT / "src/perfcast/compose/data/host_eager_torch.json"
STACKS_JSON = ROOT / "src/perfcast/specs/data/stacks.json"
STACK, COMPILED = "hf-transformers", "torch-compile"
DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def kernels(probe: dict, mode: str) -> dict[str, int]:
    """perfcast's eager kernels per layer group for the probe's model, dtype and mode."""
    m = probe["model"]
    spec = ModelSpec(name="probe-llama", model_type="llama", hidden_size=m["hidden"],
                     num_layers=1, num_heads=m["heads"], num_kv_heads=m["heads"],
                     head_dim=m["hidden"] // m["heads"], intermediate_size=m["intermediate"],
                     vocab_size=m["vocab"], position="rope", norm="rmsnorm",
                     activation="silu", gated_mlp=True)
    dtype = DTYPES[probe.get("dtype", "float32")]  # schema-1 probes before the field: fp32
    precision = Precision(weights=dtype, activations=dtype, kv_cache=dtype)
    ops = (eager_ops(spec, 1, 1, "decode", precision, attention="sdpa",
                     context=m["cached_tokens"]) if mode == "decode" else
           eager_ops(spec, 1, m["prompt_tokens"], "forward", precision, attention="sdpa",
                     logits="last"))
    per = ops.groupby("layer")["count"].sum()
    return {"layer": int(per["layer"]), "outside": int(per.sum() - per["layer"])}


def derive(probe: dict) -> dict:
    fwd, dec = kernels(probe, "forward"), kernels(probe, "decode")
    f, g = probe["forward_per_layer"], probe["generate_per_layer"]
    dispatch = (f["per_layer_s"] + g["per_layer_s"]) / (fwd["layer"] + dec["layer"])
    step = f["fixed_s"] - dispatch * fwd["outside"]
    generate = g["fixed_s"] - step - dispatch * dec["outside"]
    if min(dispatch, step, generate) <= 0:
        sys.exit(f"the probe gives a non-positive host term: {dispatch=}, {step=}, {generate=}")
    return {"kernels": {"forward": fwd, "decode": dec}, "op_dispatch_s": dispatch,
            "step_s": step, "generate_s": generate}


def train_kernels(policy: str) -> dict[str, int]:
    """perfcast's eager training kernels per layer and outside the layers for the training
    probe's model (hidden 64, 4 heads, 2 KV heads, 16 tokens; autocast for AMP)."""
    spec = ModelSpec(name="probe-llama", model_type="llama", hidden_size=64, num_layers=1,
                     num_heads=4, num_kv_heads=2, head_dim=16, intermediate_size=128,
                     vocab_size=256, position="rope", norm="rmsnorm", activation="silu",
                     gated_mlp=True)
    ops = eager_ops(spec, 1, 16, "training", Precision.uniform("bf16"), attention="sdpa",
                    optimizer="adam", autocast=policy == "amp")
    per = ops.groupby("layer")["count"].sum()
    return {"layer": int(per["layer"]), "outside": int(per.sum() - per["layer"])}


def derive_train(rows: list[dict]) -> dict:
    """train_dispatch_s and train_step_s from the training probe's rows (module docstring)."""
    slopes, kernels, fixed = {}, {}, {}
    for policy in ("amp", "pure-bf16"):
        t = {r["layers"]: r["iteration_s"] for r in rows if r["policy"] == policy}
        slopes[policy] = (t[5] - t[1]) / 4
        kernels[policy] = train_kernels(policy)
        fixed[policy] = t[1] - slopes[policy]
    dispatch = sum(slopes.values()) / sum(k["layer"] for k in kernels.values())
    step = sum(fixed[p] - dispatch * kernels[p]["outside"] for p in fixed) / len(fixed)
    if min(dispatch, step) <= 0:
        sys.exit(f"the training probe gives a non-positive host term: {dispatch=}, {step=}")
    return {"train_kernels": kernels, "train_dispatch_s": dispatch, "train_step_s": step}


def per_layer_s(probe: dict) -> float:
    """A probe's host seconds per layer: its forward and generate() slopes together."""
    return probe["forward_per_layer"]["per_layer_s"] + probe["generate_per_layer"]["per_layer_s"]


def spread(shipped: dict) -> list[float]:
    """(low, high): the reference host's time scaled by the farthest measured host's."""
    ref = per_layer_s(shipped["probes"]["cuda"])
    far = max([1.0] + [max(r, 1 / r) for r in (per_layer_s(h) / ref
                                                for h in shipped.get("other_hosts", []))])
    return [round(1 / far, 4), round(far, 4)]


def _probes(path: Path) -> dict[str, dict]:
    """A gpu_host_check.py JSON's host probes by device (cuda, cpu)."""
    rows = json.loads(path.read_text())["rows"]
    return {r["device"]: {k: v for k, v in r.items() if k != "what"}
            for r in rows if r.get("what") == "host_probe"}


def _rel(path: Path) -> str:
    return str(path.resolve().relative_to(ROOT))


def reference_cpu(shipped: dict) -> str:
    """The reference host the eager torch stacks' host costs were measured on."""
    cuda = shipped["probes"]["cuda"]
    return (f"{cuda['cpu']} host of an {cuda['device_name']}, torch {cuda['torch']}, "
            f"transformers {cuda['transformers']}")


TRAIN_NOTE = " Training host: "


def with_train(host: dict, shipped: dict, derived: dict) -> dict:
    """`host` with the training terms every eager-graph stack carries, and their provenance
    after TRAIN_NOTE (replacing an earlier derivation's)."""
    base = host["provenance"].split(TRAIN_NOTE)[0].rstrip(".") + "."
    return {**host, "train_dispatch_s": round(derived["train_dispatch_s"], 9),
            "train_step_s": round(derived["train_step_s"], 9),
            "provenance": base + TRAIN_NOTE + "scripts/derive_host_model.py from compose/"
                          "data/host_eager_torch.json's train_probe ("
                          f"{shipped['train_probe']['source']}: hidden-64 Llama training "
                          "iterations at 1 and 5 layers on the reference host, AMP and pure "
                          "bf16, host-bound): per-layer slopes over perfcast's training "
                          "kernels per layer -> train_dispatch_s; the 1-layer iteration "
                          "beyond them -> train_step_s."}


def host_entry(shipped: dict, derived: dict) -> dict:
    return {
        "op_dispatch_s": round(derived["op_dispatch_s"], 9), "module_s": 0.0,
        "step_s": round(derived["step_s"], 9), "generate_s": round(derived["generate_s"], 9),
        "spread": derived["spread"],
        "reference_cpu": reference_cpu(shipped),
        "provenance": "scripts/derive_host_model.py from compose/data/host_eager_torch.json "
                      "(perfcast.measure._host_probe on that GPU host: hidden-64 Llama forward "
                      "and generate() at 1 and 5 layers, host-bound): per-layer slopes over "
                      "perfcast's kernels per layer -> seconds per eager kernel; the forward's "
                      "fixed part beyond the embedding and head kernels -> step_s (mask, "
                      "rotary tables); generate()'s per token beyond a decode forward -> "
                      "generate_s; spread: the other probed GPU hosts' per-layer host time "
                      "against this one's, either way (widens 90% intervals only)",
    }


def compiled_entry(shipped: dict, derived: dict, old: dict) -> dict:
    """torch.compile's generated code launches each fused kernel from C++/Triton without
    per-module Python: one torch op's measured dispatch on the GPU host per kernel."""
    return {**old, "op_dispatch_s": round(shipped["probes"]["cuda"]["torch_add_s"], 9),
            "spread": derived["spread"], "reference_cpu": reference_cpu(shipped),
            "provenance": "compiled code launches kernels without per-module Python: one "
                          "torch.add on the GPU (dispatch and launch, measured by "
                          "perfcast.measure._host_probe on the reference host, "
                          "compose/data/host_eager_torch.json) per kernel, spread as "
                          "hf-transformers'; --execution cuda-graph for mode='reduce-overhead'"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--probe", type=Path, help="a gpu_host_check.py JSON to take the "
                        "probes from (default: keep the shipped ones)")
    parser.add_argument("--hosts", type=Path, nargs="*", help="gpu_host_check.py JSONs of "
                        "other GPU hosts, for the spread (default: keep the shipped ones)")
    parser.add_argument("--train-probe", type=Path, help="a gpu_train_check.py JSON to take "
                        "the training probe from (default: keep the shipped one)")
    parser.add_argument("--check", action="store_true", help="fail if the shipped files "
                        "differ from the derivation")
    args = parser.parse_args()
    shipped = json.loads(HOST_JSON.read_text())
    if args.probe:
        probes = _probes(args.probe)
        shipped = {"schema": 2,
                   "about": "Eager PyTorch host cost measured on a GPU host "
                            "(perfcast.measure._host_probe via scripts/gpu_host_check.py): "
                            "the CUDA probe gives the hf-transformers host model "
                            "(scripts/derive_host_model.py); the CPU-only probe on the same "
                            "host is the reference a --host-speed is relative to.",
                   "source": _rel(args.probe),
                   "probes": {"cuda": probes["cuda"], "cpu": probes["cpu"]},
                   "other_hosts": shipped.get("other_hosts", [])}
    if args.hosts is not None:
        shipped = {**shipped, "other_hosts": [{**_probes(p)["cuda"], "source": _rel(p)}
                                           for p in args.hosts]}
    if args.train_probe:
        rows = json.loads(args.train_probe.read_text())["rows"]
        shipped = {**shipped, "train_probe": {
            "source": _rel(args.train_probe),
            "rows": [r for r in rows if r.get("what") == "host_train_probe"]}}
    derived = {**derive(shipped["probes"]["cuda"]), "spread": spread(shipped),
               **derive_train(shipped["train_probe"]["rows"])}
    new_host = {**shipped, "derived": derived}
    stacks = json.loads(STACKS_JSON.read_text())
    entry = next(s for s in stacks["stacks"] if s["name"] == STACK)
    compiled = next(s for s in stacks["stacks"] if s["name"] == COMPILED)
    eager = [s for s in stacks["stacks"]
             if s.get("training_graph") == "eager" and s["name"] != STACK]
    new_entry = with_train(host_entry(shipped, derived), shipped, derived)
    new_compiled = compiled_entry(shipped, derived, compiled["host"])
    new_eager = [with_train(s["host"], shipped, derived) for s in eager]
    if args.check:
        same_host = new_host == json.loads(HOST_JSON.read_text())
        same_stacks = (entry["host"] == new_entry and compiled["host"] == new_compiled
                       and [s["host"] for s in eager] == new_eager)
        stale = [p.name for p, same in ((HOST_JSON, same_host), (STACKS_JSON, same_stacks))
                 if not same]
        if stale:
            sys.exit(f"stale: {stale}; run scripts/derive_host_model.py")
        print("host model up to date")
        return
    HOST_JSON.write_text(json.dumps(new_host, indent=1) + "\n")
    entry["host"], compiled["host"] = new_entry, new_compiled
    for stack, host in zip(eager, new_eager, strict=True):
        stack["host"] = host
    STACKS_JSON.write_text(json.dumps(stacks, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(derived, indent=1))


if __name__ == "__main__":
    main()
