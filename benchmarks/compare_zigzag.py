"""perfcast's accelerator mapper beside ZigZag on ResNet-50's conv layers (Eyeriss-like, 168 PEs).

The perfcast half of the side-by-side benchmark (issue 8). It reads the JSON that
benchmarks/zigzag/run_zigzag.py wrote in ZigZag's own virtual environment, runs
`perfcast.accel.search_mapping` (objective EDP, seed 0) on the same layers of
`model_problems("resnet50")` on the `eyeriss-like` preset, and prints per layer the ratios
perfcast / ZigZag of cycles, energy and DRAM traffic (8-bit words), the count-weighted model
totals, and both tools' search wall times. System Python with perfcast installed; perfcast never
imports ZigZag, and this file is not a test (benchmarks/ is outside pytest's testpaths).

    bash benchmarks/zigzag/setup.sh
    benchmarks/zigzag/.venv/bin/python benchmarks/zigzag/run_zigzag.py    # ~6 min on 1 core
    python benchmarks/compare_zigzag.py [--zigzag benchmarks/zigzag/zigzag_resnet50.json]
                                        [--json-out compare.json]

Layers are matched by loop bounds and stride: ZigZag's file lists each distinct ResNet-50 shape
once with its count; perfcast's model has one Problem per layer, grouped here by shape, and the
counts must agree. What differs by construction: perfcast adds leakage energy (ZigZag has
none), ZigZag rounds traffic to its ports' widths, and the two search different mapspaces
(perfcast: row-stationary by default; ZigZag: LOMA over its generated spatial unrollings).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from perfcast.accel import get_arch, model_problems, search_mapping

HERE = Path(__file__).resolve().parent
DEFAULT_JSON = HERE / "zigzag" / "zigzag_resnet50.json"


def shape_key(dims: dict[str, int], stride: int) -> tuple:
    """A layer's identity for matching: its seven loop bounds and its stride."""
    return (*(int(dims[d]) for d in ("N", "C", "M", "R", "S", "P", "Q")), int(stride))


def perfcast_layers(arch, objective: str, seed: int, wanted: set[tuple]) -> dict[tuple, dict]:
    """Search each distinct ResNet-50 shape in `wanted` once: result, count, names, wall time."""
    groups: dict[tuple, dict] = {}
    for prob in model_problems("resnet50"):
        key = shape_key(prob.dims, prob.stride_h)
        group = groups.setdefault(key, {"problem": prob, "count": 0, "names": []})
        group["count"] += prob.count
        group["names"].append(prob.name)
    dram = arch.levels[0].name
    groups = {key: group for key, group in groups.items() if key in wanted}
    for group in groups.values():
        start = time.perf_counter()
        res = search_mapping(arch, group["problem"], objective=objective, seed=seed)
        group["wall_s"] = time.perf_counter() - start
        group["result"] = res
        group["dram_words"] = sum(sum(actions.values()) for actions in res.accesses[dram].values())
    return groups


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zigzag", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--arch", default="eyeriss-like")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args(argv)
    if not args.zigzag.is_file():
        parser.error(f"{args.zigzag} not found: run benchmarks/zigzag/run_zigzag.py first")
    zz = json.loads(args.zigzag.read_text())
    objective = zz.get("objective", "EDP").lower()

    arch = get_arch(args.arch)
    wanted = {shape_key(layer["dims"], layer["stride"]) for layer in zz["layers"].values()}
    ours = perfcast_layers(arch, objective, args.seed, wanted)

    header = (f"{'layer':16s} {'count':>5s} {'MACs':>12s} {'cycles pc':>11s} {'cycles zz':>11s} "
              f"{'cyc ratio':>9s} {'energy ratio':>12s} {'DRAM ratio':>10s}")
    print(f"perfcast {args.arch} (objective {objective}, seed {args.seed}) vs ZigZag "
          f"{zz['version']} ({zz['architecture']}, objective {zz['objective']}); "
          "ratios are perfcast / ZigZag")
    print(header)
    rows, totals = [], {"pc": [0.0, 0.0, 0.0], "zz": [0.0, 0.0, 0.0]}
    pc_time = zz_time = 0.0
    for name, layer in zz["layers"].items():
        key = shape_key(layer["dims"], layer["stride"])
        group = ours.get(key)
        if group is None:
            print(f"{name:16s} no perfcast layer of this shape; skipped")
            continue
        if group["count"] != layer["count"]:
            print(f"{name:16s} count differs: perfcast {group['count']}, ZigZag {layer['count']}")
        res = group["result"]
        if res.macs != layer["macs"]:
            print(f"{name:16s} MACs differ: perfcast {res.macs}, ZigZag {layer['macs']}")
        n = layer["count"]
        pc = (res.cycles, res.energy_j, group["dram_words"])
        zzv = (layer["cycles"], layer["energy_j"], layer["dram_words"])
        ratios = [a / b if b else float("nan") for a, b in zip(pc, zzv, strict=True)]
        for i in range(3):
            totals["pc"][i] += n * pc[i]
            totals["zz"][i] += n * zzv[i]
        pc_time += group["wall_s"]
        zz_time += layer["wall_s"]
        rows.append({"layer": name, "perfcast_names": group["names"], "count": n,
                     "macs": layer["macs"], "perfcast": dict(zip(("cycles", "energy_j",
                     "dram_words"), pc, strict=True)), "zigzag": dict(zip(("cycles",
                     "energy_j", "dram_words"), zzv, strict=True)),
                     "ratio": dict(zip(("cycles", "energy", "dram"), ratios, strict=True)),
                     "perfcast_utilization": res.utilization,
                     "zigzag_utilization": layer["utilization"],
                     "perfcast_wall_s": group["wall_s"], "zigzag_wall_s": layer["wall_s"]})
        print(f"{name:16s} {n:5d} {layer['macs']:12,d} {pc[0]:11,.0f} {zzv[0]:11,.0f} "
              f"{ratios[0]:9.3f} {ratios[1]:12.3f} {ratios[2]:10.3f}")
    tot = [a / b for a, b in zip(totals["pc"], totals["zz"], strict=True)]
    print(f"{'model (x count)':16s} {'':5s} {'':12s} {totals['pc'][0]:11,.0f} "
          f"{totals['zz'][0]:11,.0f} {tot[0]:9.3f} {tot[1]:12.3f} {tot[2]:10.3f}")
    print(f"energy per inference: perfcast {totals['pc'][1] * 1e3:.3f} mJ, "
          f"ZigZag {totals['zz'][1] * 1e3:.3f} mJ")
    print(f"search wall time over {len(rows)} distinct layers: perfcast {pc_time:.1f} s, "
          f"ZigZag {zz_time:.1f} s ({zz_time / pc_time:.1f}x)")
    if args.json_out:
        args.json_out.write_text(json.dumps({
            "zigzag_file": str(args.zigzag), "arch": args.arch, "objective": objective,
            "seed": args.seed, "layers": rows,
            "totals": {"perfcast": totals["pc"], "zigzag": totals["zz"], "ratio": tot,
                       "fields": ["cycles", "energy_j", "dram_words"]},
            "wall_s": {"perfcast": pc_time, "zigzag": zz_time}}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
