import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.kernels import (
    EfficiencyModel,
    RooflineModel,
    UnitEfficiency,
    roofline_times,
    wave_quantization,
)
from perfcast.ops import COLUMNS, Batch, step_ops


def _gemm(m, n, k, dtype="bf16"):
    row = {"layer": "t", "op": "g", "family": "gemm", "phase": "t", "b": 1, "m": m, "n": n,
           "k": k, "flops": 2.0 * m * n * k, "bytes_read": 2.0 * (m * k + k * n),
           "bytes_written": 2.0 * m * n, "dtype": dtype, "count": 1}
    return pd.DataFrame([row], columns=COLUMNS)


def test_compute_bound_gemm_hits_the_compute_roof(a100):
    ops = _gemm(8192, 8192, 8192)
    t = roofline_times(ops, a100, waves=False)[0]
    assert t == pytest.approx(2 * 8192**3 / 312e12)


def test_memory_bound_gemv_hits_the_bandwidth_roof(a100):
    ops = _gemm(1, 8192, 8192)
    t = roofline_times(ops, a100, waves=True)[0]
    assert t == pytest.approx((2 * (8192 + 8192 * 8192) + 2 * 8192) / 2039e9)


def test_wave_quantization_formula(a100):
    # 1024x1024x64 on 108 SMs: best is 64x64 tiles -> 256 tiles -> 3 waves -> 324/256
    assert wave_quantization(_gemm(1024, 1024, 64), a100)[0] == pytest.approx(324 / 256)
    # few tiles, deep k: split-K fills the GPU (16 tiles of 64x64 x split 16 = 256 blocks,
    # 3 waves); without split-K the 16 tiles would leave u = 108 / 16
    u_deep = wave_quantization(_gemm(256, 256, 65536), a100)[0]
    assert u_deep == pytest.approx(324 / 256)
    # 64 x (108*64): exactly one wave of 64x64 tiles
    assert wave_quantization(_gemm(64, 108 * 64, 64), a100)[0] == pytest.approx(1.0)
    # one row still costs a whole 64-row tile
    assert wave_quantization(_gemm(1, 108 * 64, 64), a100)[0] == pytest.approx(64.0)


def test_efficiency_hook_slows_kernels_and_is_clipped(a100):
    class Half:
        def eta(self, ops, device):
            return np.full(len(ops), 0.5)

    class Fast:
        def eta(self, ops, device):
            return np.full(len(ops), 3.0)

    assert isinstance(Half(), EfficiencyModel) and isinstance(UnitEfficiency(), EfficiencyModel)
    ops = _gemm(4096, 4096, 4096)
    base = RooflineModel().kernel_times(ops, a100)[0]
    assert RooflineModel(Half()).kernel_times(ops, a100)[0] == pytest.approx(2 * base)
    assert RooflineModel(Fast()).kernel_times(ops, a100)[0] == pytest.approx(base)


def test_collective_rows_cost_nothing_here(llama7b, a100):
    from perfcast.specs import ParallelPlan

    ops = step_ops(llama7b, Batch.prefill(1, 64), plan=ParallelPlan(tp=2))
    times = RooflineModel().kernel_times(ops, a100)
    assert np.all(times[ops["family"].to_numpy() == "allreduce"] == 0)


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 16384), n=st.integers(1, 16384), k=st.integers(1, 16384),
       grow=st.integers(1, 4096))
def test_never_below_either_roof_and_monotone_in_m(a100, m, n, k, grow):
    ops = _gemm(m, n, k)
    t = RooflineModel().kernel_times(ops, a100)[0]
    assert t >= ops["flops"][0] / 312e12 * (1 - 1e-12)
    assert t >= (ops["bytes_read"][0] + ops["bytes_written"][0]) / 2039e9 * (1 - 1e-12)
    bigger = RooflineModel().kernel_times(_gemm(m + grow, n, k), a100)[0]
    assert bigger >= t * (1 - 1e-12)
