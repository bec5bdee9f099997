"""Continuous validation of the per-framework kernel fits (`perfcast validate kernels --by
stack --quick`): within each framework's kernel tables (trtllm, vllm, sglang) one device is
left out at a time; fail when a (stack, family) median MAPE over held-out devices regresses
past its committed ceiling (kernel_stack_accuracy_thresholds.json: measured + ~30%), or when
the cross-generation fit stops beating the plain roofline."""

import json
from pathlib import Path

import pytest

from perfcast.errors import InputError
from perfcast.validate import kernels_report

HERE = Path(__file__).parent
THRESHOLDS = json.loads((HERE / "kernel_stack_accuracy_thresholds.json").read_text())
FAMILIES = ("gemm", "attn_prefill", "attn_decode", "moe")


@pytest.fixture(scope="module")
def summary():
    report = kernels_report(quick=True, by="stack", seed=0, learned=False)  # physical fits
    return report.extras["summary"].set_index(["stack", "group", "method"])


@pytest.mark.parametrize("key", sorted(THRESHOLDS["max_mape"]))
def test_stack_family_mape_does_not_regress(summary, key):
    stack, family, method = key.split("/")
    value = summary.loc[(stack, family, method), "mape"]
    assert value <= THRESHOLDS["max_mape"][key], f"{key}: {value:.3f}"


@pytest.mark.parametrize("stack", ["trtllm", "vllm", "sglang"])
def test_cross_generation_beats_the_roofline(summary, stack):
    for family in FAMILIES:
        if (stack, family, "roofline") not in summary.index:
            continue
        cross = summary.loc[(stack, family, "cross_generation"), "mape"]
        assert cross < summary.loc[(stack, family, "roofline"), "mape"], family


def test_every_stack_and_family_is_scored(summary):
    for stack in ("trtllm", "vllm", "sglang"):
        for family in FAMILIES:
            assert summary.loc[(stack, family, "cross_generation"), "devices"] >= 2


def test_split_is_refused_with_by_stack():
    with pytest.raises(InputError):
        kernels_report(split=["generation"], by="stack")
