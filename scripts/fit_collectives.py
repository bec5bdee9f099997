"""Fit the intra-node collective terms of the cluster presets on measured NCCL all-reduces.

For each preset whose GPU has AIConfigurator NCCL all-reduce measurements in the shipped store
(2, 4 and 8 GPUs, 512 B - 512 MB; CUDA-event timed kernels), least squares on messages up to
64 KB gives the collective's fixed cost and the per-ring-step alpha
(t = base + 2(N-1) alpha), and the median bus bandwidth of messages of 256 MB and more over
the link's spec bandwidth gives its efficiency. The one-shot (custom) all-reduce terms come
from TensorRT-LLM's custom all-reduce measured the same way (`trtllm_custom`): least squares
on messages up to 64 KB gives t = base + (N-1) peer. Results go into specs/data/clusters.json
with their source; presets without measurements keep their values.

    python scripts/fit_collectives.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from perfcast.measure import query

CLUSTERS = Path(__file__).resolve().parents[1] / "src/perfcast/specs/data/clusters.json"
# presets whose GPU has no measurements of its own, and the measured GPU of the same NVLink
# generation standing in for it
STAND_IN = {"a100-sxm4-40gb": "a100-sxm4-80gb"}
SMALL_BYTES, LARGE_BYTES = 65536, 2**28


def fit(device: str) -> dict | None:
    rows = query("select n, m, median(latency_s) t from kernels where source='aiconfigurator' "
                 f"and family='allreduce' and op='nccl' and device='{device}' group by n, m")
    if rows.empty:
        return None
    small = rows[rows["m"] <= SMALL_BYTES]
    design = np.column_stack([np.ones(len(small)), 2 * (small["n"] - 1)])
    base, alpha = np.linalg.lstsq(design, small["t"].to_numpy(), rcond=None)[0]
    big = rows[(rows["m"] >= LARGE_BYTES) & (rows["n"] == rows["n"].max())]
    busbw = float(np.median(2 * (big["n"] - 1) / big["n"] * big["m"] / big["t"]))
    return {"base": max(float(base), 0.0), "alpha": max(float(alpha), 0.0), "busbw": busbw,
            "rows": len(rows)}


def fit_one_shot(device: str) -> dict | None:
    rows = query("select n, m, median(latency_s) t from kernels where source='aiconfigurator' "
                 f"and family='allreduce' and op='trtllm_custom' and device='{device}' "
                 "group by n, m")
    small = rows[rows["m"] <= SMALL_BYTES]
    if small.empty:
        return None
    design = np.column_stack([np.ones(len(small)), small["n"] - 1])
    base, peer = np.linalg.lstsq(design, small["t"].to_numpy(), rcond=None)[0]
    return {"base": max(float(base), 0.0), "peer": max(float(peer), 0.0), "rows": len(small)}


def main() -> None:
    doc = json.loads(CLUSTERS.read_text())
    presets = doc["clusters"]
    for preset in presets:
        link = preset["intra_node"]
        if link["kind"] not in ("nvlink", "nvswitch"):
            continue
        measured = STAND_IN.get(preset["device"], preset["device"])
        f = fit(measured)
        if f is None:
            continue
        link["latency_s"] = round(f["alpha"], 9)
        link["collective_base_s"] = round(f["base"], 9)
        link["bus_efficiency"] = round(min(f["busbw"] / link["bandwidth_bps"], 1.0), 4)
        preset.setdefault("sources", {})["intra_node.collectives"] = (
            f"scripts/fit_collectives.py on {f['rows']} AIConfigurator NCCL all-reduce "
            f"medians of {measured} (shared/data/aiconfigurator, in the shipped store): "
            f"base {f['base'] * 1e6:.2f} us, alpha {f['alpha'] * 1e6:.2f} us/step, "
            f"bus bandwidth {f['busbw'] / 1e9:.0f} GB/s at >= 256 MB")
        print(preset["name"], preset["sources"]["intra_node.collectives"])
        one = fit_one_shot(measured)
        if one is not None:
            link["one_shot_base_s"] = round(one["base"], 9)
            link["one_shot_peer_s"] = round(one["peer"], 9)
            preset["sources"]["intra_node.one_shot"] = (
                f"scripts/fit_collectives.py on {one['rows']} AIConfigurator TensorRT-LLM "
                f"custom all-reduce medians (<= 64 KB) of {measured}: base "
                f"{one['base'] * 1e6:.2f} us, {one['peer'] * 1e6:.3f} us per extra peer")
            print(preset["name"], preset["sources"]["intra_node.one_shot"])
    CLUSTERS.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
