"""Grading scenarios with a test-double executor; the shipped 40 load and name real options."""

import pytest

from perfcast.api import request_from_options
from perfcast.suite import builtin_scenarios, format_value, parse_scenario, run_scenario

SCENARIO = """
id: t
title: two variants
command: infer
model: m
variants: {fast: {tp: 2}, slow: {tp: 1}}
targets:
  - {name: TTFT, path: ttft_s}
  - {name: gemm, path: breakdown.prefill.family.gemm}
  - {name: speed-up, path: ttft_s, variant: fast, baseline: slow}
"""


def fake(command, options):
    """TTFT halves with TP; a key that itself contains a dot, as the infer payload has."""
    return {"ttft_s": 1.0 / options["tp"], "breakdown": {"prefill": {"family.gemm": 0.25}}}


def test_all_targets_printed_is_supported_and_ratios_come_from_the_baseline():
    r = run_scenario(parse_scenario(SCENARIO), fake)
    assert r.status == "supported" and not r.errors
    values = {(v.name, v.run): v.value for v in r.values}
    assert values[("TTFT", "fast")] == 0.5 and values[("TTFT", "slow")] == 1.0
    assert values[("gemm", "slow")] == 0.25
    assert values[("speed-up", "fast")] == 2.0


def test_missing_metrics_make_partial_and_a_failing_run_is_recorded():
    from perfcast.errors import InputError

    def half(command, options):
        if options["tp"] == 1:
            raise InputError("tp", "no")
        return {"ttft_s": 0.5, "breakdown": None}  # a metric printed as null

    r = run_scenario(parse_scenario(SCENARIO), half)
    assert r.status == "partial"
    assert r.errors == {"slow": "tp: no"}
    r = run_scenario(parse_scenario(SCENARIO), lambda c, o: {"ttft_s": None, "breakdown": None})
    assert r.status == "unsupported"


def test_results_are_deterministic():
    s = parse_scenario(SCENARIO)
    assert run_scenario(s, fake) == run_scenario(s, fake)


def test_the_scenarios_of_scenarios_md_ship_with_real_option_names():
    scenarios = builtin_scenarios()
    ids = [s.id for s in scenarios]
    assert len(ids) == 48 == len(set(ids))
    assert ids[:3] == ["T1.1", "T1.2", "T1.3"]
    assert ids[-8:] == ["S1", "S2", "S3", "S4", "S5", "S7", "S8", "S6"]
    for s in scenarios:  # every run is a valid request (names and types)
        for options in s.runs().values():
            request_from_options(s.command, options)


@pytest.mark.parametrize("path, value, text", [
    ("ttft_s", 0.0123, "12.3 ms"), ("e2e_s.p99", 2.5, "2.5 s"),
    ("throughput_tok_s", 898.9, "898.9 tok/s"), ("tokens_per_s", 84970.2, "84,970 tok/s"),
    ("memory_per_gpu_bytes", 3.2e10, "32 GB"),
    ("mfu", 0.4123, "41.2%"), ("chosen.config", "h100 tp4 x3", "h100 tp4 x3"),
    ("anything", None, "—")])
def test_values_are_printed_with_units(path, value, text):
    assert format_value(path, value) == text


def pid_payload(command, options):
    """Module level, so the suite's process pool can run it."""
    import os
    return {"ttft_s": 0.1, "pid": os.getpid()}


def test_exclusive_scenarios_run_alone_in_this_process_and_order_is_kept():
    import os

    from perfcast.suite import run_suite

    text = ("id: {id}\ntitle: t\ncommand: infer\nexclusive: {ex}\n"
            "targets: [{{name: pid, path: pid}}]\n")
    scenarios = [parse_scenario(text.format(id=i, ex=str(i == "b").lower()))
                 for i in ("a", "b", "c")]
    results = run_suite(scenarios, pid_payload, workers=2)
    assert [r.id for r in results] == ["a", "b", "c"]
    pids = {r.id: r.values[0].value for r in results}
    assert pids["b"] == os.getpid()
    assert pids["a"] != os.getpid() and pids["c"] != os.getpid()


def test_declared_units_and_ratios_are_printed_as_such():
    r = run_scenario(parse_scenario(SCENARIO), fake)
    speedup = next(v for v in r.values if v.name == "speed-up")
    assert speedup.unit == "ratio"
    assert format_value(speedup.path, speedup.value, speedup.unit) == "2x"
    assert format_value("comm.tp", 0.0598, "s") == "59.8 ms"
    assert format_value("error", -0.0851, "fraction") == "-8.5%"
    assert format_value("energy_per_mac_j", 4.07e-12) == "4.07 pJ"
