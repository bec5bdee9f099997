"""README figures come from scripts/readme_figures.py: every marker names a figure it makes.

Fast: nothing is regenerated here (the script runs the suite, the `validate` checks and
`perfcast cpu`); each source's parsing is checked on a small fake payload."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("readme_figures",
                                                  ROOT / "scripts" / "readme_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_readme_marker_names_a_known_figure():
    script = _script()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert script.markers(text), "README has no figure markers"
    assert script.unknown_markers(text) == []


def test_every_known_figure_has_a_marker():
    script = _script()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert not script.KNOWN - set(script.markers(text))


def test_check_mode_parses_and_passes():
    assert _script().main(["--check"]) == 0


def test_rewrite_replaces_only_named_markers():
    script = _script()
    text = ("a <!-- fig:suite_time -->36 s<!-- /fig --> "
            "b <!-- fig:suite_supported -->1/2<!-- /fig -->")
    assert script.rewrite(text, {"suite_time": "40 s"}) == text.replace("36 s", "40 s")


def _row(split, device, group, method, mape, n=10, **more):
    return {"split": split, "device": device, "group": group, "method": method, "mape": mape,
            "n": n, **more}


def test_kernel_figures_are_the_median_over_families_per_split_and_method():
    script = _script()
    summary = [{"split": s, "method": m, "median_family_mape": 0.05, "pooled_mape": 0.5}
               for s in script.KERNEL_SPLITS for m in script.KERNEL_METHODS]
    summary[0]["median_family_mape"] = 0.786  # generation, roofline
    payload = {"summary": summary, "rows": [],
               "targets": {"cross_generation_median_mape": 0.08, "target_measured_mape": 0.03}}
    figures = script.kernels_from_payload(payload)
    assert set(figures) == set(script.SOURCES["kernels"])
    assert figures["kernels_generation_roofline"] == "78.6%"
    assert figures["kernels_loo_vidur_target_measured"] == "5.0%"
    assert figures["kernels_verdict"] == "not yet met"  # target-measured 5% > 3%
    for row in summary:
        row["median_family_mape"] = 0.02
    assert script.kernels_from_payload(payload)["kernels_verdict"] == "met"


def test_model_figures_count_targets_met_and_pool_coverage_and_per_op_errors():
    script = _script()
    rows = [_row("models", "t4", "all", "target_measured", 0.179, n=5, coverage_90=0.6),
            _row("models", "mi100", "all", "target_measured", 0.055, n=15, coverage_90=1.0),
            _row("models", "t4", "all", "roofline", 0.45, n=5, coverage_90=None),
            _row("per_op", "t4", "gemm", "target_measured", 0.30, n=10),
            _row("per_op", "mi100", "gemm", "target_measured", 0.10, n=30),
            _row("per_op", "mi100", "gemm", "roofline", 0.90, n=30)]
    figures = script.models_from_payload({"rows": rows, "target_mape": 0.06})
    assert figures["models_t4_perfcast"] == "17.9%" and figures["models_t4_roofline"] == "45.0%"
    assert figures["models_p100_pcie_16gb_perfcast"] == "-"  # not in the payload
    assert figures["models_targets_met"] == "1 of 2"
    assert figures["models_coverage"] == "90%"  # (0.6 x 5 + 1.0 x 15) / 20
    assert figures["models_coverage_verdict"] == "met"
    assert figures["models_per_op_gemm"] == "15%"  # (0.3 x 10 + 0.1 x 30) / 40, roofline out
    assert figures["models_per_op_gemm_t4"] == "30%"


def test_cpu_figures_are_ranges_over_runs():
    script = _script()
    runs = [({"predicted_s": 0.0331, "measured_s": 0.0370, "error": -0.085}, 7.6),
            ({"predicted_s": 0.0377, "measured_s": 0.0361, "error": 0.018}, 8.2)]
    assert script.cpu_from_payloads("small-transformer", runs) == {
        "cpu_small_transformer_predicted": "33.1–37.7 ms",
        "cpu_small_transformer_measured": "36.1–37.0 ms",
        "cpu_small_transformer_error": "-8.5% to +1.8%",
        "cpu_small_transformer_time": "8 s"}


def test_collective_figures_pool_rows_by_their_counts():
    script = _script()
    rows = [_row("fit", "h100-sxm", "allreduce/small", "nccl", 0.04, n=30),
            _row("fit", "b200-sxm", "allreduce/small", "nccl", 0.08, n=10),
            _row("fit", "h100-sxm", "allreduce/small", "spec_alphabeta", 0.34, n=40),
            _row("held-out:device", "h100-sxm", "allgather/medium", "nccl", 0.10),
            _row("held-out:device", "l40s", "allgather/medium", "nccl", 0.48),
            _row("held-out:device", "rtx-pro-6000", "allgather/large", "nccl", 2.53),
            _row("held-out:multi-node", "a100-sxm4-80gb/16gpu", "allreduce/all", "nccl", 0.82)]
    figures = script.collectives_from_payload({"rows": rows})
    assert set(figures) == set(script.SOURCES["collectives"])
    assert figures["collectives_fit_small"] == "5.0%"  # (0.04 x 30 + 0.08 x 10) / 40
    assert figures["collectives_fit_medium"] == "-"
    assert figures["collectives_fit_baseline"] == "34% / - / -"
    assert figures["collectives_held_out_device_medium"] == "10.0%"  # PCIe boxes left out
    assert figures["collectives_pcie_gap"] == "48–253%"
    assert figures["collectives_multi_node_spec"] == "82%"


def test_training_figures_read_tokens_per_second_rows():
    script = _script()
    cells = {("all", "all", "roofline"): 0.937, ("all", "all", "sum_of_kernels"): 0.267,
             ("all", "A100-40GB", "sum_of_kernels"): 0.140,
             ("all", "A100-80GB", "sum_of_kernels"): 0.166,
             ("all", "H100-80GB", "sum_of_kernels"): 0.475,
             ("heldout_model", "all", "perfcast"): 0.103,
             ("heldout_device", "all", "perfcast"): 0.262}
    rows = [_row(s, d, group, m, v) for (s, d, m), v in cells.items()
            for group in ("tokens_per_s", "mfu")]
    rows[-1]["mape"] = 9.0  # an MFU row: not read
    assert script.training_from_payload({"rows": rows}) == {
        "training_roofline": "94%", "training_sum_of_kernels": "27%",
        "training_a100": "14–17%", "training_h100": "48%", "training_heldout_model": "10%",
        "training_heldout_device": "26%"}


def _serving(group, method, metric, median, p90=0.5, n=9):
    return {"split": "all", "device": "all", "group": f"{group}/{metric}", "method": method,
            "mape": 0.9, "median_ape": median, "p90_ape": p90, "n": n}


def test_serving_figures_read_the_rows_pooled_over_everything():
    script = _script()
    rows = [_serving("all", m, k, v, n=27) for m, k, v in (
        ("perfcast", "ttft", 0.155), ("perfcast", "tpot", 0.103),
        ("sum_of_kernels", "ttft", 0.758), ("sum_of_kernels", "tpot", 0.263),
        ("roofline", "ttft", 0.839), ("roofline", "tpot", 0.61))]
    rows.append({**rows[0], "split": "vllm", "median_ape": 0.99})  # one engine: not read
    payload = {"rows": rows, "targets": {"ttft": 0.1, "tpot": 0.07}}
    assert script.serving_row_from_payload("dense_held_out", payload) == {
        "serving_dense_held_out_points": "27", "serving_dense_held_out_ttft": "15.5%",
        "serving_dense_held_out_tpot": "10.3%",
        "serving_dense_held_out_sum_of_kernels": "75.8% / 26.3%",
        "serving_dense_held_out_roofline": "83.9% / 61.0%", "serving_verdict": "not met"}
    rows = [_serving("dense-bf16", "perfcast", "ttft", 0.125, p90=0.553),
            _serving("dense-bf16", "perfcast", "tpot", 0.08, p90=0.138),
            _serving("dense-bf16", "roofline", "ttft", 0.922),
            _serving("dense-bf16", "roofline", "tpot", 0.621),
            _serving("moe-fp8", "perfcast", "ttft", 0.5)]
    assert script.technique_from_payload("dense-bf16", "dense-bf16", {"rows": rows}) == {
        "serving_dense_bf16_points": "9", "serving_dense_bf16_ttft": "12.5% / 55%",
        "serving_dense_bf16_tpot": "8.0% / 14%", "serving_dense_bf16_roofline": "92% / 62%"}


def test_a_cpu_error_that_rounds_to_zero_prints_without_a_minus():
    runs = [({"predicted_s": 0.03, "measured_s": 0.03, "error": -0.0001}, 7.0),
            ({"predicted_s": 0.03, "measured_s": 0.03, "error": 0.052}, 7.0)]
    assert _script().cpu_from_payloads("resnet18", runs)["cpu_resnet18_error"] == (
        "+0.0% to +5.2%")
