"""ZigZag on ResNet-50's conv layers on perfcast's Eyeriss-like accelerator; writes a JSON.

The ZigZag half of the side-by-side benchmark (issue 8; benchmarks/compare_zigzag.py is the other
half). It runs in its own virtual environment, never in perfcast's, and perfcast never imports it:

    bash benchmarks/zigzag/setup.sh                      # once: .venv with zigzag-dse 3.9.1
    benchmarks/zigzag/.venv/bin/python benchmarks/zigzag/run_zigzag.py \
        [--out benchmarks/zigzag/zigzag_resnet50.json] [--objective EDP] [--lpf-limit 6] \
        [--layers conv1,l1_3x3]

What it runs: the 24 distinct conv shapes of ResNet-50 v1.5 at batch 1, 224 x 224 (torchvision's
layout: the stride sits on each stage's first 3x3; 53 convs in all, each distinct shape with its
count) plus the final FC as a 1x1 conv, on `eyeriss_like_perfcast.yaml` (perfcast's preset in
ZigZag's format: same levels, capacities and per-access energies). Every layer is searched on its
own (LOMA temporal search, three generated spatial mappings, the objective's best kept). No
padding: inputs span (P-1)*stride + R rows, as perfcast's Problem and Timeloop count them.

What it writes, per layer: loop bounds (perfcast's names N C M R S P Q and the stride), count,
MACs, cycles (ZigZag's latency_total2: compute plus on/off-loading stalls; also the ideal
cycles), energy in joules (MAC + memory; ZigZag has no leakage), the chosen spatial mapping,
per-level access counts per operand (ZigZag's four directions, in accesses of that memory's port
width, and the same converted to 8-bit words), DRAM totals, and the layer's search wall time;
then the total wall time and the software versions.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import platform
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARCH_YAML = HERE / "eyeriss_like_perfcast.yaml"
MAPPING_YAML = HERE / "mapping.yaml"
WORD_BITS = 8  # perfcast's eyeriss-like preset: every word is 8 bits, partial sums included

# ResNet-50 v1.5 conv layers, batch 1, 224 x 224: name -> (C, M, R, P, stride, count).
# Square filters and outputs (S = R, Q = P). Stage inputs: 56, 28, 14, 7 (after the stride).
RESNET50: dict[str, tuple[int, int, int, int, int, int]] = {
    "conv1": (3, 64, 7, 112, 2, 1),
    "l1_reduce_first": (64, 64, 1, 56, 1, 1),
    "l1_reduce": (256, 64, 1, 56, 1, 2),
    "l1_3x3": (64, 64, 3, 56, 1, 3),
    "l1_expand": (64, 256, 1, 56, 1, 4),  # 3 expands + the 64 -> 256 projection (same shape)
    "l2_reduce_first": (256, 128, 1, 56, 1, 1),
    "l2_3x3_s2": (128, 128, 3, 28, 2, 1),
    "l2_3x3": (128, 128, 3, 28, 1, 3),
    "l2_reduce": (512, 128, 1, 28, 1, 3),
    "l2_expand": (128, 512, 1, 28, 1, 4),
    "l2_down": (256, 512, 1, 28, 2, 1),
    "l3_reduce_first": (512, 256, 1, 28, 1, 1),
    "l3_3x3_s2": (256, 256, 3, 14, 2, 1),
    "l3_3x3": (256, 256, 3, 14, 1, 5),
    "l3_reduce": (1024, 256, 1, 14, 1, 5),
    "l3_expand": (256, 1024, 1, 14, 1, 6),
    "l3_down": (512, 1024, 1, 14, 2, 1),
    "l4_reduce_first": (1024, 512, 1, 14, 1, 1),
    "l4_3x3_s2": (512, 512, 3, 7, 2, 1),
    "l4_3x3": (512, 512, 3, 7, 1, 2),
    "l4_reduce": (2048, 512, 1, 7, 1, 2),
    "l4_expand": (512, 2048, 1, 7, 1, 3),
    "l4_down": (1024, 2048, 1, 7, 2, 1),
    "fc": (2048, 1000, 1, 1, 1, 1),
}
DIRECTIONS = ("rd_out_to_low", "wr_in_by_low", "rd_out_to_high", "wr_in_by_high")


def layer_dict(layer_id: int, name: str, c: int, m: int, r: int, p: int, stride: int) -> dict:
    """One conv in ZigZag's workload format (its ONNX parser builds the same dict)."""
    return {
        "id": layer_id, "name": name, "operator_type": "Conv",
        "equation": "O[b][k][oy][ox]+=W[k][c][fy][fx]*I[b][c][iy][ix]",
        "dimension_relations": [f"ix={stride}*ox+1*fx", f"iy={stride}*oy+1*fy"],
        "loop_dims": ["B", "K", "C", "OY", "OX", "FY", "FX"],
        "loop_sizes": [1, m, c, p, p, r, r],
        "operand_precision": {"W": WORD_BITS, "I": WORD_BITS, "O": WORD_BITS,
                              "O_final": WORD_BITS},
        "operand_source": {"I": layer_id},
    }


def accesses(cme) -> dict:
    """Per operand and memory level: ZigZag's access counts, raw and in 8-bit words."""
    out: dict[str, dict] = {}
    hierarchy = cme.accelerator.memory_hierarchy
    for layer_op, per_level in cme.memory_word_access.items():
        mem_op = cme.memory_operand_links.layer_to_mem_op(layer_op)
        levels = hierarchy.get_memory_levels(mem_op=mem_op)
        rows = {}
        for count, level in zip(per_level, levels, strict=False):
            raw = {d.name.lower(): int(count.get(d)) for d in count.data}
            rows[level.name] = {
                "accesses": raw,
                "words": {d: raw[d] * (level.get_max_bandwidth(mem_op, key) or 0) / WORD_BITS
                          for key, d in ((k, k.name.lower()) for k in count.data)},
            }
        out[str(layer_op)] = rows
    return out


def run_layer(api, layer: dict, objective: str, lpf_limit: int, dump: Path) -> tuple[dict, float]:
    """Search one layer; the best cost-model evaluation as a plain dict, and its wall time."""
    start = time.perf_counter()
    energy_pj, _, cmes = api.get_hardware_performance_zigzag(
        workload=[layer], accelerator=str(ARCH_YAML), mapping=str(MAPPING_YAML),
        opt=objective, dump_folder=str(dump / layer["name"]), lpf_limit=lpf_limit,
        loma_show_progress_bar=False)
    seconds = time.perf_counter() - start
    cme = cmes[0][1][0][0]
    acc = accesses(cme)
    dram = {op: rows.get("dram", {}) for op, rows in acc.items()}
    row = {
        "macs": int(cme.layer.total_mac_count),
        "cycles": float(cme.latency_total2),
        "ideal_cycles": float(cme.ideal_cycle),
        "compute_cycles": float(cme.latency_total0),
        "utilization": float(cme.mac_utilization2),
        "spatial_utilization": float(cme.mac_spatial_utilization),
        "energy_j": float(energy_pj) * 1e-12,
        "mac_energy_j": float(cme.mac_energy) * 1e-12,
        "spatial_mapping": str(cme.spatial_mapping),
        "temporal_mapping": str(cme.temporal_mapping),
        "accesses": acc,
        "dram_accesses_64b": sum(sum(v["accesses"].values()) for v in dram.values() if v),
        "dram_words": sum(sum(v["words"].values()) for v in dram.values() if v),
        "wall_s": seconds,
    }
    return row, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "zigzag_resnet50.json")
    parser.add_argument("--objective", choices=("EDP", "energy", "latency"), default="EDP")
    parser.add_argument("--lpf-limit", type=int, default=6,
                        help="ZigZag LOMA: loop prime factors searched per layer")
    parser.add_argument("--layers", default="", help="comma-separated subset of layer names")
    args = parser.parse_args(argv)
    names = [n for n in args.layers.split(",") if n] or list(RESNET50)
    unknown = sorted(set(names) - set(RESNET50))
    if unknown:
        parser.error(f"unknown layers {unknown}; known: {', '.join(RESNET50)}")

    logging.disable(logging.WARNING)  # ZigZag logs every stage at INFO
    from zigzag import api

    layers, total = {}, 0.0
    with tempfile.TemporaryDirectory(prefix="zigzag-") as tmp:
        for layer_id, name in enumerate(names):
            c, m, r, p, stride, count = RESNET50[name]
            row, seconds = run_layer(api, layer_dict(layer_id, name, c, m, r, p, stride),
                                     args.objective, args.lpf_limit, Path(tmp))
            total += seconds
            dims = {"N": 1, "C": c, "M": m, "R": r, "S": r, "P": p, "Q": p}
            layers[name] = {"dims": dims, "stride": stride, "count": count, **row}
            print(f"{name:16s} cycles {row['cycles']:>12,.0f}  "
                  f"energy {row['energy_j'] * 1e6:9.2f} uJ  "
                  f"DRAM words {row['dram_words']:>12,.0f}  {seconds:6.2f} s", flush=True)
    result = {
        "tool": "zigzag-dse", "version": importlib.metadata.version("zigzag-dse"),
        "python": platform.python_version(), "architecture": ARCH_YAML.name,
        "objective": args.objective, "lpf_limit": args.lpf_limit, "workload": "resnet50",
        "layers": layers, "total_wall_s": total,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{len(layers)} layers, {total:.1f} s of search; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
