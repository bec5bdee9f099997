"""The issue's bar: every scenario of SCENARIOS.md prints its target metrics (48/48), through
the same `perfcast.api.run` every face calls; and the numbers are reproducible."""

import math

import pytest

from perfcast.suite import builtin_scenarios, run_suite

# X5 and S8 time this CPU (S8's check compares errors of live measurements): run alone, after
# the rest (tests/conftest.py)
pytestmark = pytest.mark.cpu_timing

@pytest.fixture(scope="module")
def results():
    return run_suite(builtin_scenarios(), workers=2)


def test_all_scenarios_are_supported(results):
    bad = {r.id: (r.status, r.errors, [v.name for v in r.values if v.value is None])
           for r in results if r.status != "supported"}
    assert not bad
    assert len(results) == 48


def test_numeric_targets_are_finite(results):
    for r in results:
        for v in r.values:
            if isinstance(v.value, float):
                assert math.isfinite(v.value), (r.id, v.name, v.run)


def test_same_inputs_same_numbers(results):
    """Bit-identical across runs: seeded serving, the seeded accelerator mapper, training.
    The first run is the whole suite's (in its worker processes), the second one here."""
    ids = {"I2.1", "T3.1", "X6", "X15"}
    first = [r for r in results if r.id in ids]
    again = run_suite([s for s in builtin_scenarios() if s.id in ids])
    assert [r.id for r in first] == [r.id for r in again]
    assert [r.values for r in first] == [r.values for r in again]


# S8 times this CPU live: how much worse than uncalibrated its held-out steps may come out
# when no family that dominates them passed its check (6 runs on a 2-core EPYC: at most 8%
# worse; CI's failure before the host fit weighed host shares: 107% worse)
S8_NO_HARM = 0.15


def test_s8_the_calibration_made_here_improves_the_measured_steps(results):
    """S8 measured this CPU, calibrated on it and forecast the measured steps (host speed
    held out). The calibration never makes them worse beyond the timing noise; where the
    GEMMs (most of a GPT-2 step's kernel time) passed their check, it makes them better."""
    s8 = next(r for r in results if r.id == "S8")
    value = {v.path: v.value for v in s8.values}
    before, after = value["step_mape_uncalibrated"], value["step_mape_calibrated_held_out"]
    assert after <= before * (1 + S8_NO_HARM), (after, before)
    if "gemm/fp32" in value["families_calibrated"]:
        assert after < before, (after, before)  # 5 runs here: 23-67% better
    assert value["families_calibrated"]  # it changed something, and says what
