"""Regenerate the README's figures that come from commands, between markers.

A figure in README.md is written as `<!-- fig:NAME -->VALUE<!-- /fig -->`; this script runs the
command behind each NAME and rewrites VALUE, so the README says what the commands print.
Run: `python scripts/readme_figures.py [--only suite,models,...]` (the kernels source runs
every split of `perfcast validate kernels`, the slowest part); `--check` only checks that every
marker names a known figure (fast, used by tests/test_readme_figures.py).

Figures covered (source: command):
- suite: wall time, coverage and X5's time of all builtin scenarios (as
  `python benchmarks/bench_suite.py` measures them, 2 workers);
- models: `perfcast validate models --json`, the per-device MAPE table, targets met, pooled
  90%-interval coverage and the per-op MAPE per kernel family;
- kernels: `perfcast validate kernels --split ... --json` (all five splits), the median over
  kernel families per split and method;
- cpu: `perfcast cpu --model M --quick --json` run CPU_RUNS times per model, the ranges of
  predicted and measured latency, signed error and wall time (this machine's CPU);
- collectives: `perfcast validate collectives --json`, row-weighted MAPE pooled over devices
  per README row and size regime;
- training: `perfcast validate training --json`, tokens/s MAPE per method and split;
- serving: `perfcast validate serving --json` on the README's samples (held-out and
  diagnostic dense, all MoE; by technique; disaggregated), median and P90 APE.
Each source's parsing is a pure function of the command's JSON (`*_from_payload`), tested on
a small fake payload.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from perfcast.validate import MULTI_NODE_METHOD, MULTI_NODE_POOLED

README = Path(__file__).resolve().parents[1] / "README.md"
MARKER = re.compile(r"<!-- fig:(?P<name>[a-z0-9_]+) -->(?P<value>.*?)<!-- /fig -->")

# device slug in `validate models` -> its README row (group "all")
MODEL_DEVICES = ("p100-pcie-16gb", "v100-pcie-32gb", "a100-sxm4-40gb", "mi100",
                 "a100-pcie-40gb", "a100-pcie-80gb", "mi210", "t4")
MODEL_COLUMNS = ("roofline", "sum_of_kernels", "sum_of_measured_ops", "perfcast")
PERFCAST_TIERS = ("target_measured", "cross_generation")


def _slug(name: str) -> str:
    """A device, model or split name as a marker name part (`loo:vidur` -> `loo_vidur`)."""
    return name.replace("-", "_").replace(":", "_")


def model_figure_names() -> list[str]:
    """`models_<device>_<column>` for every cell of the README's models table."""
    return [f"models_{_slug(d)}_{c}" for d in MODEL_DEVICES for c in MODEL_COLUMNS]


MODEL_TARGET_MET = "models_targets_met"
MODEL_COVERAGE = ("models_coverage", "models_coverage_verdict")
PER_OP_FAMILIES = ("softmax", "norm", "elementwise", "gemm")
PER_OP_DEVICE = "t4"  # the one device the README names beside the pooled per-op figures


def models_extra_names() -> list[str]:
    return [MODEL_TARGET_MET, *MODEL_COVERAGE,
            *(f"models_per_op_{f}" for f in PER_OP_FAMILIES),
            f"models_per_op_gemm_{PER_OP_DEVICE}"]


KERNEL_SPLITS = ("generation", "neusight", "loo:aiconfigurator", "loo:neusight", "loo:vidur")
KERNEL_METHODS = ("roofline", "cross_generation", "target_measured", "learned", "learned_target")


def kernel_figure_names() -> list[str]:
    """`kernels_<split>_<method>` for every cell of the README's kernel table, the verdict."""
    return [*(f"kernels_{_slug(s)}_{m}" for s in KERNEL_SPLITS for m in KERNEL_METHODS),
            "kernels_verdict"]


CPU_MODELS = ("resnet18", "small-transformer")
CPU_RUNS = 3
CPU_PARTS = ("predicted", "measured", "error", "time")


def cpu_figure_names() -> list[str]:
    return [f"cpu_{_slug(m)}_{p}" for m in CPU_MODELS for p in CPU_PARTS]


PCIE_BOXES = ("l40s", "rtx-pro-6000")
ALL_OPS = ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv")
# README row -> (split, collectives pooled, devices left out, method of the main cells)
COLLECTIVE_ROWS = {
    "fit": ("fit", ("allreduce",), (), "nccl"),
    "held_out_op": ("held-out:op", ("allgather", "reducescatter", "alltoall"), (), "nccl"),
    "held_out_source": ("held-out:source", ("allreduce",), (), "nccl"),
    "held_out_device": ("held-out:device", ALL_OPS, PCIE_BOXES, "nccl"),
    "held_out_generation": ("held-out:generation", ALL_OPS, PCIE_BOXES, "nccl"),
    "multi_node": ("held-out:multi-node", ("allreduce",), (MULTI_NODE_POOLED,),
                   MULTI_NODE_METHOD),
}
REGIMES = ("small", "medium", "large")


def collective_figure_names() -> list[str]:
    """Per README row: one cell per size regime and the spec-sheet baseline; the two gaps."""
    return [*(f"collectives_{row}_{cell}" for row in COLLECTIVE_ROWS
              for cell in (*REGIMES, "baseline")),
            "collectives_pcie_gap", "collectives_multi_node_spec"]


HELD_OUT = ("--points-per-group", "3", "--seed", "1", "--exclude-seed", "0")
# README serving row -> the `perfcast validate serving` options that make it
SERVING_ROWS = {"dense_held_out": ("--arch", "dense", *HELD_OUT),
                "dense_diagnostic": ("--arch", "dense", "--points-per-group", "3"),
                "moe": ("--arch", "moe")}
SERVING_CELLS = ("points", "ttft", "tpot", "sum_of_kernels", "roofline")
TECHNIQUES = ("dense-bf16", "dense-fp8", "dense-fp4", "moe-fp8", "moe-fp4", "disagg")
TECHNIQUE_CELLS = ("points", "ttft", "tpot", "roofline")


def serving_figure_names() -> list[str]:
    """The README's two serving tables: per sample, then per technique (disaggregated: all
    points)."""
    return ["serving_verdict",
            *(f"serving_{row}_{c}" for row in SERVING_ROWS for c in SERVING_CELLS),
            *(f"serving_{_slug(t)}_{c}" for t in TECHNIQUES for c in TECHNIQUE_CELLS)]


TRAINING_FIGURES = ("training_roofline", "training_sum_of_kernels", "training_a100",
                    "training_h100", "training_heldout_model", "training_heldout_device")

SOURCES = {"suite": ["suite_time", "suite_supported", "suite_x5_time"],
           "models": [*model_figure_names(), *models_extra_names()],
           "kernels": kernel_figure_names(), "cpu": cpu_figure_names(),
           "collectives": collective_figure_names(), "training": list(TRAINING_FIGURES),
           "serving": serving_figure_names()}
KNOWN = {name for names in SOURCES.values() for name in names}


def _pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}%}"


def _span(values: list[float], fmt: str, sep: str = "–") -> str:
    """`low–high` of `values` in `fmt`, or one value when both ends print alike."""
    low, high = fmt.format(min(values)), fmt.format(max(values))
    return low if low == high else f"{low}{sep}{high}"


def _pct_range(values: list[float]) -> str:
    """`14–17%`: whole percents, the unit once."""
    return _span([v * 100 for v in values], "{:.0f}") + "%"


def _pooled(rows: list[dict]) -> float | None:
    """Row-weighted MAPE of several rows (each a MAPE over `n` points), None when empty."""
    n = sum(r["n"] for r in rows)
    return sum(r["mape"] * r["n"] for r in rows) / n if n else None


def suite_figures() -> dict[str, str]:
    """Wall time and coverage of all builtin scenarios on 2 workers (bench_suite's run)."""
    from perfcast.suite import builtin_scenarios, run_suite

    scenarios = builtin_scenarios()
    start = time.perf_counter()
    results = run_suite(scenarios, workers=2)
    wall_s = time.perf_counter() - start
    supported = sum(r.status == "supported" for r in results)
    x5_s = next(r.wall_s for r in results if r.id == "X5")
    return {"suite_time": f"{wall_s:.0f} s", "suite_supported": f"{supported}/{len(results)}",
            "suite_x5_time": f"{x5_s:.0f} s"}


def _cli_json(*args: str) -> dict:
    """What `perfcast ARGS --json` prints, parsed."""
    done = subprocess.run(["perfcast", *args, "--json"], check=True, capture_output=True,
                          text=True)
    return json.loads(done.stdout)


def models_from_payload(payload: dict) -> dict[str, str]:
    """Per-device whole-model MAPE (group `all`), how many devices meet the target, the 90%
    intervals' coverage pooled over configurations, and the per-op MAPE per kernel family
    (perfcast's tier, devices pooled) of `perfcast validate models --json`."""
    rows = {(r["device"], r["method"]): r for r in payload["rows"]
            if r["split"] == "models" and r["group"] == "all"}
    figures, tier_rows = {}, []
    for device in MODEL_DEVICES:
        for column in MODEL_COLUMNS:
            methods = PERFCAST_TIERS if column == "perfcast" else (column,)
            row = next((rows[(device, m)] for m in methods if (device, m) in rows), None)
            figures[f"models_{_slug(device)}_{column}"] = _pct(None if row is None
                                                               else row["mape"])
            if column == "perfcast" and row is not None:
                tier_rows.append(row)
    met = sum(r["mape"] <= payload["target_mape"] for r in tier_rows)
    covered = sum(r["coverage_90"] * r["n"] for r in tier_rows) / sum(r["n"] for r in tier_rows)
    figures[MODEL_TARGET_MET] = f"{met} of {len(tier_rows)}"
    figures["models_coverage"] = _pct(covered, 0)
    figures["models_coverage_verdict"] = "met" if 0.85 <= covered <= 0.95 else "not met"
    per_op = [r for r in payload["rows"] if r["split"] == "per_op"
              and r["method"] in PERFCAST_TIERS]
    for family in PER_OP_FAMILIES:
        figures[f"models_per_op_{family}"] = _pct(
            _pooled([r for r in per_op if r["group"] == family]), 0)
    figures[f"models_per_op_gemm_{PER_OP_DEVICE}"] = _pct(_pooled(
        [r for r in per_op if r["group"] == "gemm" and r["device"] == PER_OP_DEVICE]), 0)
    return figures


def models_figures() -> dict[str, str]:
    return models_from_payload(_cli_json("validate", "models"))


def kernels_from_payload(payload: dict) -> dict[str, str]:
    """Median MAPE over kernel families per split and method (the summary of `perfcast
    validate kernels --json`), and whether both targets are met."""
    median = {(r["split"], r["method"]): r["median_family_mape"] for r in payload["summary"]}
    figures = {f"kernels_{_slug(s)}_{m}": _pct(median.get((s, m)))
               for s in KERNEL_SPLITS for m in KERNEL_METHODS}
    targets = payload["targets"]
    met = all(median[(s, "cross_generation")] <= targets["cross_generation_median_mape"]
              and median[(s, "target_measured")] <= targets["target_measured_mape"]
              for s in ("generation", "neusight"))
    figures["kernels_verdict"] = "met" if met else "not yet met"
    return figures


def kernels_figures() -> dict[str, str]:
    splits = [arg for split in KERNEL_SPLITS for arg in ("--split", split)]
    return kernels_from_payload(_cli_json("validate", "kernels", *splits))


def cpu_from_payloads(model: str, runs: list[tuple[dict, float]]) -> dict[str, str]:
    """Ranges over (payload of `perfcast cpu --json`, wall seconds) runs of one model."""
    slug = f"cpu_{_slug(model)}"
    return {f"{slug}_predicted": _span([p["predicted_s"] * 1e3 for p, _ in runs], "{:.1f}")
            + " ms",
            f"{slug}_measured": _span([p["measured_s"] * 1e3 for p, _ in runs], "{:.1f}")
            + " ms",
            f"{slug}_error": _span([round(p["error"], 3) + 0.0 for p, _ in runs], "{:+.1%}",
                                   " to "),  # + 0.0: no "-0.0%"
            f"{slug}_time": _span([wall for _, wall in runs], "{:.0f}") + " s"}


def cpu_figures() -> dict[str, str]:
    """CPU_RUNS runs per model of `perfcast cpu --quick --json`, one after another."""
    figures = {}
    for model in CPU_MODELS:
        runs = []
        for _ in range(CPU_RUNS):
            start = time.perf_counter()
            payload = _cli_json("cpu", "--model", model, "--quick")
            runs.append((payload, time.perf_counter() - start))
        figures.update(cpu_from_payloads(model, runs))
    return figures


def collectives_from_payload(payload: dict) -> dict[str, str]:
    """Row-weighted MAPE per README row and size regime, the spec-sheet alpha-beta baseline
    beside it, the PCIe boxes' held-out range and the multi-node spec-network error."""
    rows = payload["rows"]

    def pick(split: str, ops: tuple[str, ...], left_out: tuple[str, ...], method: str,
             regime: str) -> list[dict]:
        return [r for r in rows if r["split"] == split and r["method"] == method
                and r["device"] not in left_out and r["group"] in
                {f"{op}/{regime}" for op in ops}]

    figures = {}
    for row, (split, ops, left_out, method) in COLLECTIVE_ROWS.items():
        for regime in REGIMES:
            figures[f"collectives_{row}_{regime}"] = _pct(
                _pooled(pick(split, ops, left_out, method, regime)))
        figures[f"collectives_{row}_baseline"] = " / ".join(
            _pct(_pooled(pick(split, ops, left_out, "spec_alphabeta", regime)), 0)
            for regime in REGIMES)
    others = tuple({r["device"] for r in rows})
    pcie = [_pooled(pick("held-out:device", ALL_OPS, tuple(d for d in others if d != box),
                         "nccl", regime))
            for box in PCIE_BOXES for regime in ("medium", "large")]
    pcie = [value for value in pcie if value is not None]
    figures["collectives_pcie_gap"] = _pct_range(pcie)
    figures["collectives_multi_node_spec"] = _pct(_pooled(
        pick("held-out:multi-node", ("allreduce",), (MULTI_NODE_POOLED,), "nccl", "all")), 0)
    return figures


def collectives_figures() -> dict[str, str]:
    return collectives_from_payload(_cli_json("validate", "collectives"))


def training_from_payload(payload: dict) -> dict[str, str]:
    """Tokens/s MAPE of `perfcast validate training --json` (per device: --by device)."""
    mape = {(r["split"], r["device"], r["method"]): r["mape"] for r in payload["rows"]
            if r["group"] == "tokens_per_s"}
    a100 = [mape[("all", d, "sum_of_kernels")] for d in ("A100-40GB", "A100-80GB")]
    return {"training_roofline": _pct(mape[("all", "all", "roofline")], 0),
            "training_sum_of_kernels": _pct(mape[("all", "all", "sum_of_kernels")], 0),
            "training_a100": _pct_range(a100),
            "training_h100": _pct(mape[("all", "H100-80GB", "sum_of_kernels")], 0),
            "training_heldout_model": _pct(mape[("heldout_model", "all", "perfcast")], 0),
            "training_heldout_device": _pct(mape[("heldout_device", "all", "perfcast")], 0)}


def training_figures() -> dict[str, str]:
    return training_from_payload(_cli_json("validate", "training"))


def _serving_cells(payload: dict, group: str) -> dict[str, dict]:
    """(method, metric) -> the row pooled over everything for one group (`all`, or a
    technique) of `perfcast validate serving --json`."""
    return {(r["method"], r["group"].rsplit("/", 1)[1]): r for r in payload["rows"]
            if r["split"] == "all" and r["device"] == "all"
            and r["group"].rsplit("/", 1)[0] == group}


def _ttft_tpot(cells: dict[str, dict], method: str, digits: int = 1) -> str:
    """`TTFT / TPOT` median APE of one method."""
    return " / ".join(_pct(cells[(method, k)]["median_ape"], digits) for k in ("ttft", "tpot"))


def serving_row_from_payload(row: str, payload: dict) -> dict[str, str]:
    """One row of the per-sample table: points, perfcast's median APE of TTFT and TPOT, and
    the two one-step baselines' (TTFT / TPOT); the held-out row also says whether perfcast
    meets the targets."""
    cells = _serving_cells(payload, "all")
    figures = {f"serving_{row}_points": str(cells[("perfcast", "ttft")]["n"]),
               **{f"serving_{row}_{k}": _pct(cells[("perfcast", k)]["median_ape"])
                  for k in ("ttft", "tpot")},
               **{f"serving_{row}_{m}": _ttft_tpot(cells, m)
                  for m in ("sum_of_kernels", "roofline")}}
    if row == "dense_held_out":
        met = all(cells[("perfcast", k)]["median_ape"] <= payload["targets"][k]
                  for k in ("ttft", "tpot"))
        figures["serving_verdict"] = "met" if met else "not met"
    return figures


def technique_from_payload(technique: str, group: str, payload: dict) -> dict[str, str]:
    """One row of the per-technique table: points, perfcast's median / P90 APE of TTFT and
    of TPOT, the roofline's median TTFT / TPOT."""
    cells, slug = _serving_cells(payload, group), f"serving_{_slug(technique)}"
    figures = {f"{slug}_points": str(cells[("perfcast", "ttft")]["n"]),
               f"{slug}_roofline": _ttft_tpot(cells, "roofline", 0)}
    for metric in ("ttft", "tpot"):
        r = cells[("perfcast", metric)]
        figures[f"{slug}_{metric}"] = f"{_pct(r['median_ape'])} / {_pct(r['p90_ape'], 0)}"
    return figures


def serving_figures() -> dict[str, str]:
    """Five runs of `perfcast validate serving`: the three samples, the held-out sample by
    technique, and the disaggregated points (about 10 minutes in all)."""
    figures = {}
    for row, options in SERVING_ROWS.items():
        figures.update(serving_row_from_payload(row, _cli_json("validate", "serving",
                                                               *options)))
    by_technique = _cli_json("validate", "serving", "--by", "technique", *HELD_OUT)
    for technique in TECHNIQUES[:-1]:
        figures.update(technique_from_payload(technique, technique, by_technique))
    disagg = _cli_json("validate", "serving", "--mode", "disagg", "--by", "technique")
    figures.update(technique_from_payload("disagg", "all", disagg))
    return figures


PRODUCERS = {"suite": suite_figures, "models": models_figures, "kernels": kernels_figures,
             "cpu": cpu_figures, "collectives": collectives_figures,
             "training": training_figures, "serving": serving_figures}


def markers(text: str) -> list[str]:
    """The figure names of every marker in `text`, in order."""
    return [m.group("name") for m in MARKER.finditer(text)]


def unknown_markers(text: str) -> list[str]:
    """Markers that name no figure this script makes."""
    return [name for name in markers(text) if name not in KNOWN]


def rewrite(text: str, values: dict[str, str]) -> str:
    """`text` with each marker whose name is in `values` holding its new value."""
    def sub(match: re.Match) -> str:
        name = match.group("name")
        value = values.get(name, match.group("value"))
        return f"<!-- fig:{name} -->{value}<!-- /fig -->"
    return MARKER.sub(sub, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="only check that every marker names a known figure")
    parser.add_argument("--only", default=",".join(PRODUCERS),
                        help=f"sources to regenerate, comma-separated: {', '.join(PRODUCERS)}")
    args = parser.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    bad = unknown_markers(text)
    if bad or args.check:
        print(f"unknown figure markers: {', '.join(bad)}" if bad else
              f"{len(markers(text))} markers, all known")
        return 1 if bad else 0
    values: dict[str, str] = {}
    for source in args.only.split(","):
        values.update(PRODUCERS[source]())
    README.write_text(rewrite(text, values), encoding="utf-8")
    for name, value in values.items():
        print(f"{name}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
