"""Build src/perfcast/specs/data/gpus.json from the spec sheets in ../shared/data.

Run from the repository root:
`python scripts/build_hardware_catalog.py [SHARED_DATA_DIR [OUTPUT_JSON]]` (default output:
src/perfcast/specs/data/gpus.json). Every number in the output names its source: the CSV row
(hardware/gpus.csv), an AIConfigurator system YAML, the SUPPLEMENT table below for the few
values no shared sheet has (SM counts and clocks of the newest parts), or, for parts no
shared sheet has at all, scripts/data/gpus_hand_entered.json (merged in unchanged, each entry
after the one its "after" names). Two-GCD packages (MI250, MI250X) become one GCD per
device, the package's numbers kept beside it (PER_GCD below).
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

import yaml

GB = 1e9
CSV_SRC = "shared/data/hardware/gpus.csv row {row!r}"
AIC_SRC = "shared/data/aiconfigurator/systems/{file} (NVIDIA AIConfigurator, Apache-2.0)"

# catalog name -> (gpus.csv row or None, aiconfigurator yaml or None, aliases)
ENTRIES: dict[str, tuple[str | None, str | None, list[str]]] = {
    "v100-sxm2-32gb": ("V100-SXM2-32GB", None, ["V100-SXM2", "Tesla V100-SXM2-32GB"]),
    "v100-pcie-32gb": ("V100-PCIe-32GB", None, ["V100-PCIE", "Tesla V100-PCIE-32GB"]),
    "p100-pcie-16gb": ("P100-PCIe-16GB", None, ["P100", "Tesla P100-PCIE-16GB"]),
    "p4": ("P4", None, ["Tesla P4"]),
    "t4": ("T4", None, ["Tesla T4"]),
    "a10": ("A10", None, ["NVIDIA A10"]),
    "a40": ("A40", None, ["NVIDIA A40"]),
    "l4": ("L4", "l4.yaml", ["NVIDIA L4"]),
    "l40s": ("L40S", "l40s.yaml", ["NVIDIA L40S"]),
    "a100-sxm4-40gb": ("A100-SXM4-40GB", None, ["NVIDIA A100-SXM4-40GB"]),
    "a100-sxm4-80gb": ("A100-SXM4-80GB", "a100_sxm.yaml", ["NVIDIA A100-SXM4-80GB"]),
    "a100-pcie-40gb": ("A100-PCIe-40GB", None, ["NVIDIA A100-PCIE-40GB"]),
    "a100-pcie-80gb": (
        "A100-PCIe-80GB",
        "a100_pcie.yaml",
        ["NVIDIA A100 80GB PCIe", "A100-80GB-PCIE"],
    ),
    "h100-sxm": (
        "H100-SXM5-80GB",
        "h100_sxm.yaml",
        ["H100-SXM5-80GB", "NVIDIA H100 80GB HBM3"],
    ),
    "h100-pcie": ("H100-PCIe-80GB", "h100_pcie.yaml", ["H100-PCIE-80GB", "NVIDIA H100 PCIe"]),
    "h200-sxm": ("H200-SXM-141GB", "h200_sxm.yaml", ["H200", "NVIDIA H200"]),
    "b200-sxm": ("B200-SXM (HGX, 1000 W)", "b200_sxm.yaml", ["B200", "NVIDIA B200"]),
    "b300-sxm": (None, "b300_sxm.yaml", ["B300", "NVIDIA B300 SXM6 AC"]),
    "gb200": ("GB200 (per B200 GPU, 1200 W)", "gb200.yaml", ["NVIDIA GB200"]),
    "gb300": (None, "gb300.yaml", ["NVIDIA GB300"]),
    "rtx-pro-6000": (
        None,
        "rtx_pro_6000_server.yaml",
        ["RTX PRO 6000", "NVIDIA RTX PRO 6000 Blackwell Server Edition"],
    ),
    "mi100": ("MI100", None, ["AMD Instinct MI100"]),
    "mi210": ("MI210", None, ["AMD Instinct MI210"]),
    "mi250": ("MI250", None, ["AMD Instinct MI250"]),
    "mi250x": ("MI250X", None, ["AMD Instinct MI250X"]),
    "mi300x": ("MI300X", None, ["AMD Instinct MI300X"]),
}

# Short names that fit several entries: refused listing the candidates, never resolved to one
# (specs/_catalog.py checks that each candidate exists and no entry also answers to the name).
A100S = ["a100-sxm4-40gb", "a100-sxm4-80gb", "a100-pcie-40gb", "a100-pcie-80gb"]
AMBIGUOUS: dict[str, list[str]] = {
    "A100": A100S,
    "A100-40GB": ["a100-sxm4-40gb", "a100-pcie-40gb"],
    "A100-80GB": ["a100-sxm4-80gb", "a100-pcie-80gb"],
    "A100-SXM": ["a100-sxm4-40gb", "a100-sxm4-80gb"],
    "A100-SXM4": ["a100-sxm4-40gb", "a100-sxm4-80gb"],
    "A100-PCIE": ["a100-pcie-40gb", "a100-pcie-80gb"],
    "H100": ["h100-sxm", "h100-pcie"],
    "H100-80GB": ["h100-sxm", "h100-pcie"],
    "V100": ["v100-sxm2-32gb", "v100-pcie-32gb"],
    "V100-32GB": ["v100-sxm2-32gb", "v100-pcie-32gb"],
    "RTX": ["rtx-4090", "rtx-5090", "rtx-pro-6000"],
    "MI300": ["mi300x", "mi325x"],
}
HAND_ENTERED = Path("scripts/data/gpus_hand_entered.json")
PROVENANCE = (
    "built by scripts/build_hardware_catalog.py from ../shared/data; per-GCD MI250/MI250X, "
    "MI325X, MI355X, A10G, H20, H800, L20, L40, RTX 4090 and RTX 5090 hand-entered (issue 20), "
    "each number's source in its entry"
)

# Values no shared sheet gives: (value, where it comes from). Marked in each device's sources.
WP = "perfcast supplement: vendor architecture whitepaper / product brief, not in ../shared/data"
SAME_B200 = "perfcast supplement: assumed equal to B200's gpus.csv value (same SM datapath)"
SUPPLEMENT: dict[str, dict[str, tuple[float | str, str]]] = {
    "h200-sxm": {
        "sm_count": (132, WP + " (same GH100 die as H100 SXM)"),
        "boost_clock_hz": (1.83e9, "assumed equal to h100-sxm (gpus.csv)"),
        "l2_bytes": (50e6, WP),
        "smem_per_sm_bytes": (228e3, WP),
    },
    "h100-pcie": {"boost_clock_hz": (1.755e9, WP)},
    "v100-sxm2-32gb": {"boost_clock_hz": (1.53e9, WP), "tdp_w": (300, WP)},
    "v100-pcie-32gb": {"tdp_w": (250, WP)},
    "a10": {"tdp_w": (150, WP)},
    "b200-sxm": {"sm_count": (148, WP)},
    "gb200": {"sm_count": (148, WP)},
    "b300-sxm": {
        "sm_count": (160, WP + " (Blackwell Ultra)"),
        "arch": ("Blackwell Ultra", WP),
        "vendor": ("NVIDIA", WP),
        "fp32_flops": (80e12, SAME_B200),
    },
    "gb300": {
        "sm_count": (160, WP + " (Blackwell Ultra)"),
        "arch": ("Blackwell Ultra", WP),
        "vendor": ("NVIDIA", WP),
        "fp32_flops": (80e12, SAME_B200),
    },
    "rtx-pro-6000": {
        "sm_count": (188, WP),
        "arch": ("Blackwell", WP),
        "vendor": ("NVIDIA", WP),
        "fp32_flops": (117e12, WP + " (approximate, server edition)"),
    },
}

CSV_PEAKS = {  # dtype -> gpus.csv column (TFLOP/s)
    "fp32": "fp32_tflops",
    "tf32": "tf32_tflops",
    "fp16": "fp16_tensor_tflops_dense",
    "bf16": "bf16_tensor_tflops_dense",
    "fp8": "fp8_tensor_tflops_dense",
    "int8": "int8_tensor_tops_dense",
    "fp4": "fp4_tensor_tflops_dense",
}
YAML_PEAKS = {
    "bf16": "bfloat16_tc_flops",
    "fp8": "fp8_tc_flops",
    "int8": "int8_tc_flops",
    "fp4": "fp4_tc_flops",
}


def _num(text: str) -> float | None:
    return float(text) if text.strip() else None


def _from_csv(row: dict[str, str], src: str) -> tuple[dict, dict]:
    out: dict = {"vendor": row["vendor"], "arch": row["arch"]}
    peaks = {d: _num(row[c]) * 1e12 for d, c in CSV_PEAKS.items() if _num(row[c])}
    scalars = {
        "sm_count": (_num(row["sm_count"]), 1),
        "boost_clock_hz": (_num(row["boost_clock_mhz"]), 1e6),
        "hbm_capacity_bytes": (_num(row["hbm_gb"]), GB),
        "hbm_bandwidth_bps": (_num(row["hbm_bandwidth_gbs"]), GB),
        "l2_bytes": (_num(row["l2_mb"]), 1e6),
        "smem_per_sm_bytes": (_num(row["smem_per_sm_kb"]), 1e3),
        "tdp_w": (_num(row["tdp_w"]), 1),
        "nvlink_bandwidth_bps": (_num(row["nvlink_or_xgmi_gbs_per_direction"]), GB),
    }
    sources = {"vendor": src, "arch": src}
    for field, (value, scale) in scalars.items():
        if value is not None:
            out[field] = int(value) if field == "sm_count" else value * scale
            sources[field] = src
    out["dense_peak_flops"] = peaks
    sources.update({f"dense_peak_flops.{d}": src for d in peaks})
    if _num(row["pcie_gen"]):  # x16 link, per direction (PCI-SIG: 16/32/64/128 GB/s, gen 3..6)
        out["pcie_bandwidth_bps"] = 16 * GB * 2 ** (_num(row["pcie_gen"]) - 3)
        sources["pcie_bandwidth_bps"] = src + " pcie_gen, as an x16 link"
    if row["notes"]:
        sources["notes"] = row["notes"]
    return out, sources


def _fill_from_yaml(out: dict, sources: dict, spec: dict, src: str) -> None:
    gpu, node = spec["gpu"], spec["node"]
    peaks = out.setdefault("dense_peak_flops", {})
    for dtype, key in YAML_PEAKS.items():
        if key in gpu and dtype not in peaks:
            peaks[dtype] = float(gpu[key])
            sources[f"dense_peak_flops.{dtype}"] = src
    if "bf16" in peaks and "fp16" not in peaks and "bfloat16_tc_flops" in gpu:
        peaks["fp16"] = peaks["bf16"]
        sources["dense_peak_flops.fp16"] = src + " (bf16 rate; fp16 equals it on NVIDIA TCs)"
    nvlink = node.get("intra_node_bw") if node["intra_node_bw"] > node["pcie_bw"] else None
    for field, value in (
        ("hbm_capacity_bytes", gpu.get("mem_capacity")),
        ("hbm_bandwidth_bps", gpu.get("mem_bw")),
        ("tdp_w", gpu.get("power")),
        ("nvlink_bandwidth_bps", nvlink),
        ("pcie_bandwidth_bps", node.get("pcie_bw")),
    ):
        if value is not None and field not in out:
            out[field] = float(value)
            sources[field] = src


def _apply_supplement(name: str, out: dict, sources: dict) -> None:
    for field, (value, source) in SUPPLEMENT.get(name, {}).items():
        if field.endswith("_flops"):
            dtype = field.removesuffix("_flops")
            if dtype not in out["dense_peak_flops"]:
                out["dense_peak_flops"][dtype] = value
                sources[f"dense_peak_flops.{dtype}"] = source
        elif field not in out:
            out[field] = value
            sources[field] = source


# NeuSight's device configs list AMD CDNA's FP32 matrix (MFMA) rate beside the vector rate.
NEUSIGHT_CONFIGS = {"mi100": "AMD_Instinct_MI100.json", "mi210": "AMD_Instinct_MI210.json",
                    "mi250": "AMD_Instinct_MI250.json"}


def _matrix_peaks(name: str, out: dict, sources: dict, shared: Path) -> None:
    if name not in NEUSIGHT_CONFIGS:
        return
    rel = f"neusight/scripts/asplos/data/device_configs/{NEUSIGHT_CONFIGS[name]}"
    config = json.loads((shared / rel).read_text())
    if config.get("SingleFLOPsMM"):
        out["matrix_peak_flops"] = {"fp32": float(config["SingleFLOPsMM"]) * 1e9}
        sources["matrix_peak_flops.fp32"] = f"{rel} SingleFLOPsMM (GFLOP/s)"


# Two-GCD OAM packages: ROCm, PyTorch and every framework run one GCD as one device, so the
# device entry is one GCD (the package's numbers halved) and "package" keeps the whole.
# name -> (extra alias, the device's notes, which replace the package-level CSV notes)
PER_GCD: dict[str, tuple[str, str]] = {
    "mi250": ("MI250 GCD", "One GCD of the MI250 package (104 CUs; same GCD as MI210: 181 TF "
              "bf16, 45.3 TF FP32 matrix). Package: 2 GCDs, 362.1 TF, 128 GB, 3.2 TB/s, 560 W "
              "(AnandTech; hmc-tech/yobitel say 500 W). 6 Infinity Fabric links."),
    "mi250x": ("MI250X GCD", "One GCD of the MI250X package (110 CUs, 191.5 TF bf16 = 383 / 2; "
               "1700 MHz x 128 FMA x 2 x 440 matrix cores). Package: 2 GCDs, 383 TF, 128 GB, "
               "3.2 TB/s, 560 W. Infinity Fabric 100 GB/s per link (yobitel), 8 links."),
}
GCDS = 2
PACKAGE_FIELDS = ("sm_count", "dense_peak_flops", "hbm_capacity_bytes", "hbm_bandwidth_bps",
                  "tdp_w")
PACKAGE_NOTE = (
    "the whole OAM package: two GCDs, each a separate device to ROCm, PyTorch and every "
    "framework (rocm-smi lists 8 devices on a 4-package node); a single kernel runs on one GCD, "
    "so the device entry is one GCD (half)"
)
PACKAGE_SRC = (
    "entry 'package' beside 'device' keeps the whole-package numbers; per-GCD halving as "
    "ml-engineering (compute/accelerator/README.md: 'AMD MI250X has 2 GCDs - so the theoretical "
    "TFLOPS needs to be halved, as a single matmul uses only 1 of them') and HF optimum-amd "
    "perf_hardware.mdx (MI250 node shows 8 devices)"
)
HALF_SRC = "half of the two-GCD package value ({src}); one GCD is one device"


def _csv_matrix_fp32(row: dict[str, str]) -> float:
    """The package's FP32 matrix rate, which gpus.csv gives only in its notes ('FP32 matrix X')."""
    match = re.search(r"FP32 matrix ([0-9]+(?:\.[0-9]+)?)", row["notes"])
    if match is None:
        raise SystemExit(f"gpus.csv row {row['name']!r}: no 'FP32 matrix' in its notes")
    return float(match.group(1)) * 1e12


def _per_gcd(entry: dict, row: dict[str, str]) -> dict:
    """Split a two-GCD package entry (built from its CSV row) into one GCD plus 'package'."""
    out, sources = entry["device"], entry["device"]["sources"]
    src, matrix = CSV_SRC.format(row=row["name"]), _csv_matrix_fp32(row)
    alias, notes = PER_GCD[out["name"]]
    package: dict = {"gcds": GCDS, **{f: out[f] for f in PACKAGE_FIELDS},
                     "note": PACKAGE_NOTE, "source": src, "matrix_peak_flops": {"fp32": matrix}}
    if "l2_bytes" in out:
        package["l2_bytes"] = out["l2_bytes"]
    for field in ("sm_count", "hbm_capacity_bytes", "hbm_bandwidth_bps", "l2_bytes", "tdp_w"):
        if field in out:
            out[field] = out[field] // GCDS if field == "sm_count" else out[field] / GCDS
            sources[field] = HALF_SRC.format(src=src)
    out["dense_peak_flops"] = {d: v / GCDS for d, v in out["dense_peak_flops"].items()}
    sources.update({f"dense_peak_flops.{d}": HALF_SRC.format(src=src)
                    for d in out["dense_peak_flops"]})
    sources["notes"] = notes
    if "matrix_peak_flops" in out:  # NeuSight's rate, already one GCD's
        sources["matrix_peak_flops.fp32"] += " (one GCD, as NeuSight times one GCD)"
    sources["package"] = PACKAGE_SRC
    if "matrix_peak_flops" not in out:
        out["matrix_peak_flops"] = {"fp32": matrix / GCDS}
        sources["matrix_peak_flops.fp32"] = (
            f"half of 'FP32 matrix {matrix / 1e12:g}' in the notes of {src}")
    return {"aliases": [*entry["aliases"], alias], "device": out, "package": package}


def _merge_hand_entered(devices: list[dict], path: Path) -> None:
    """Insert each hand-entered entry right after the entry its 'after' names."""
    for item in json.loads(path.read_text())["devices"]:
        entry = {k: v for k, v in item.items() if k != "after"}
        names = [d["device"]["name"] for d in devices]
        if item["after"] not in names or entry["device"]["name"] in names:
            raise SystemExit(f"{path}: {entry['device']['name']!r} after {item['after']!r}: "
                             "'after' must name an earlier entry and the name must be new")
        devices.insert(names.index(item["after"]) + 1, entry)


def build(shared: Path, hand_entered: Path = HAND_ENTERED) -> dict:
    with open(shared / "hardware/gpus.csv") as f:
        rows = {r["name"]: r for r in csv.DictReader(f)}
    devices = []
    for name, (row_name, yaml_file, aliases) in ENTRIES.items():
        out: dict = {"name": name}
        sources: dict = {}
        if row_name:
            fields, sources = _from_csv(rows[row_name], CSV_SRC.format(row=row_name))
            out.update(fields)
        if yaml_file:
            spec = yaml.safe_load((shared / "aiconfigurator/systems" / yaml_file).read_text())
            _fill_from_yaml(out, sources, spec, AIC_SRC.format(file=yaml_file))
        _apply_supplement(name, out, sources)
        _matrix_peaks(name, out, sources, shared)
        out["kernel_launch_overhead_s"] = 4e-6
        sources["kernel_launch_overhead_s"] = (
            "perfcast default (typical CUDA/HIP launch cost); fitted per device by the "
            "kernel-efficiency layer"
        )
        out["sources"] = sources
        entry = {"aliases": aliases, "device": out}
        devices.append(_per_gcd(entry, rows[row_name]) if name in PER_GCD else entry)
    _merge_hand_entered(devices, hand_entered)
    return {"provenance": PROVENANCE, "ambiguous": AMBIGUOUS, "devices": devices}


def main() -> None:
    shared = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data")
    target = Path(sys.argv[2] if len(sys.argv) > 2 else "src/perfcast/specs/data/gpus.json")
    target.write_text(json.dumps(build(shared), indent=1, sort_keys=False) + "\n")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
