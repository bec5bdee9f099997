"""Derive the shipped model-level validation labels from NeuSight's ASPLOS artifact.

Reads shared/data/neusight/scripts/asplos/label/<GPU>/*.json (measured whole-model times) and
the per-op torch.fx traces beside them (*.csv, one layer of the same model, every graph node
timed), and writes src/perfcast/validate/data/neusight_models.csv (one row per measured
configuration) and neusight_layer_ops.csv (per trace: measured seconds per kernel family in
layer 0). Nothing is fitted to either file: they judge composition.

    python scripts/build_model_labels.py [--shared ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "src" / "perfcast" / "validate" / "data"
DEVICES = {"NVIDIA_A100-PCIE-40GB": "a100-pcie-40gb", "NVIDIA_A100_80GB_PCIe": "a100-pcie-80gb",
           "NVIDIA_A100-SXM4-40GB": "a100-sxm4-40gb", "Tesla_V100-PCIE-32GB": "v100-pcie-32gb",
           "Tesla_P100-PCIE-16GB": "p100-pcie-16gb", "Tesla_T4": "t4",
           "AMD_Instinct_MI100": "mi100", "AMD_Instinct_MI210": "mi210"}
MODELS = {"bert_large": "bert-large", "gpt2_large": "gpt2-large", "gpt3_xl": "gpt3-xl",
          "gpt3_27": "gpt3-2.7b", "opt_13": "opt-1.3b", "switchxl4": "switch-xl4"}
NAME = re.compile(r"(?P<model>[a-z0-9_]+?)-(?P<mode>inf|train)-(?P<seq>\d+)-(?P<batch>\d+)"
                  r"(?:-(?P<variant>fusion|dp4|tp4|pp4_1))?$")
# fx node -> kernel family; nodes not listed launch no kernel (views, sizes, getitem, ...)
# or none in eval mode (dropout). Matching is on the node's target text.
FAMILY_PATTERNS = [
    (r"(?:dense|query|key|value|_proj|c_attn|c_proj|c_fc|fc1|fc2|lm_head|classifier|wi|wo"
     r"|router\.classifier|addmm)\b", "gemm"),
    (r"\b(?:matmul|bmm)\b", "gemm"),
    (r"(?:LayerNorm|layer_norm|ln_\w+|ln_f|\.ln\b)", "norm"),
    (r"\bsoftmax\b", "softmax"),
    (r"\b(?:gelu|relu|tanh|activation|activation_fn|act|intermediate_act_fn)\b", "activation"),
    (r"(?:wte|wpe|embeddings?\.|embed_tokens|embed_positions|shared)\b", "embedding"),
    (r"\b(?:add|sub|mul|truediv|pow|where|max|contiguous|reshape|dropout|drop)\b",
     "elementwise"),
]


def _family(target: str, training: bool) -> str | None:
    if not training and "dropout" in target.lower():
        return None
    for pattern, family in FAMILY_PATTERNS:
        if re.search(pattern, target):
            return family
    return None


def _trace_seconds(path: Path, training: bool) -> tuple[float, float]:
    """(whole one-layer trace, layer 0 alone) in seconds, every node's measured time summed."""
    d = pd.read_csv(path)
    in_layer = d["meta"].astype(str).str.contains(r"\.(?:h|layer|layers|block)\.0'", regex=True)
    lat = (d["fw_latency"] + d["bw_latency"].fillna(0)) if training else d["latency"]
    return float(lat.sum() / 1e3), float(lat[in_layer].sum() / 1e3)


def _layer_families(path: Path, training: bool) -> dict[str, float]:
    d = pd.read_csv(path)
    in_layer = d["meta"].astype(str).str.contains(r"\.(?:h|layer|layers|block)\.0'", regex=True)
    lat = (d["fw_latency"] + d["bw_latency"].fillna(0)) if training else d["latency"]
    out: dict[str, float] = {}
    for target, seconds in zip(d.loc[in_layer, "target"].astype(str),
                               lat[in_layer] / 1e3, strict=True):
        fam = _family(target, training)
        key = fam or "no_kernel"
        out[key] = out.get(key, 0.0) + float(seconds)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    root = Path(ap.parse_args().shared) / "neusight" / "scripts" / "asplos" / "label"
    models, ops = [], []
    for path in sorted(root.glob("*/*.json")):
        match = NAME.match(path.stem)
        if not match or match["model"] not in MODELS:
            raise SystemExit(f"unrecognised label file {path}")
        label = json.loads(path.read_text())
        training = match["mode"] == "train"
        row = {"device": DEVICES[path.parent.name], "model": MODELS[match["model"]],
               "mode": "training" if training else "forward", "seq_len": int(match["seq"]),
               "batch": int(match["batch"]), "variant": match["variant"] or "",
               "config": path.stem, "num_layers": label["num_layer"] or 0,
               "e2e_s": label["e2e_latency"] / 1e3, "forward_s": label["fw_latency"] / 1e3,
               "backward_s": label["bwall_latency"] / 1e3,
               "source_file": str(path.relative_to(root.parents[3]))}
        trace = path.with_suffix(".csv")
        total, layer = _trace_seconds(trace, training) if trace.exists() else (None, None)
        models.append({**row, "trace_total_s": total, "trace_layer_s": layer})
        if trace.exists():
            for fam, sec in sorted(_layer_families(trace, training).items()):
                ops.append({**{k: row[k] for k in ("device", "model", "mode", "seq_len",
                                                   "batch", "config")},
                            "family": fam, "layer_s": sec,
                            "source_file": str(trace.relative_to(root.parents[3]))})
    OUT.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(models).to_csv(OUT / "neusight_models.csv", index=False)
    pd.DataFrame(ops).to_csv(OUT / "neusight_layer_ops.csv", index=False)
    print(f"{len(models)} model labels, {len(ops)} per-family layer rows")


if __name__ == "__main__":
    main()
