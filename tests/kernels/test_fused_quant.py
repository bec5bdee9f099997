"""GEMMs whose producer quantised their input (Precision.activation_quant='fused') skip the
quantisation pass and its kernels: cheaper than the separately-quantised GEMMs the
AIConfigurator tables time, by at most that overhead, and never below the roofline."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.errors import InputError
from perfcast.kernels import PhysicsModel, roofline_times, shipped_calibration
from perfcast.ops import COLUMNS, FUSED_QUANT, Batch, step_ops
from perfcast.serve import ServeConfig
from perfcast.specs import Precision, get_device, get_model


def _gemm(op: str, m: int, n: int, k: int, dtype: str) -> dict:
    w = {"fp4": 0.5625, "fp8": 1.0, "bf16": 2.0}[dtype]
    return {"layer": "l", "op": op, "family": "gemm", "phase": "decode", "b": 1, "m": float(m),
            "n": float(n), "k": float(k), "flops": 2.0 * m * n * k,
            "bytes_read": 2.0 * m * k + w * n * k, "bytes_written": 2.0 * m * n,
            "dtype": dtype, "count": 1}


def _times(device: str, rows: list[dict]) -> np.ndarray:
    df = pd.DataFrame(rows)[COLUMNS]
    return PhysicsModel(shipped_calibration()).kernel_times(df, get_device(device))


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 16384), n=st.integers(256, 32768), k=st.integers(256, 16384),
       case=st.sampled_from([("b200-sxm", "fp4"), ("b200-sxm", "fp8"), ("h100-sxm", "fp8")]))
def test_fused_is_cheaper_but_never_beats_the_roofline(m, n, k, case):
    device, dtype = case
    rows = [_gemm("gemm", m, n, k, dtype), _gemm(f"gemm:{FUSED_QUANT}", m, n, k, dtype)]
    separate, fused = _times(device, rows)
    assert fused <= separate
    roof = roofline_times(pd.DataFrame(rows)[COLUMNS], get_device(device), waves=False)[1]
    assert fused >= roof


def test_small_decode_gemm_sheds_the_quantisation_kernels():
    """At decode sizes the separate quantisation (amax, cast: extra launches) is most of the
    measured FP4 GEMM; fused, the GEMM costs about what its weight bytes say."""
    separate, fused = _times("b200-sxm", [_gemm("gemm", 16, 5120, 8192, "fp4"),
                                          _gemm(f"gemm:{FUSED_QUANT}", 16, 5120, 8192, "fp4")])
    assert fused < 0.7 * separate


def test_bf16_gemms_are_untouched():
    a, b = _times("h100-sxm", [_gemm("gemm", 64, 4096, 4096, "bf16"),
                               _gemm(f"gemm:{FUSED_QUANT}", 64, 4096, 4096, "bf16")])
    assert a == b


def test_step_ops_mark_only_quantised_weight_gemms():
    model = get_model("llama-3.1-8b")
    fused = Precision.uniform("fp8", activation_quant="fused")
    ops = step_ops(model, Batch(decode_context=(100,) * 4), fused)
    gemms = ops[ops["family"] == "gemm"]
    assert len(gemms) and gemms["op"].str.endswith(f":{FUSED_QUANT}").all()
    plain = step_ops(model, Batch(decode_context=(100,) * 4),
                     Precision(activation_quant="fused"))  # bf16: nothing to quantise
    assert not plain["op"].str.contains(FUSED_QUANT).any()


def test_bad_activation_quant_names_the_field():
    with pytest.raises(InputError) as err:
        ServeConfig(model="llama-3.1-8b", gpu="h100-sxm",
                    precision=Precision.uniform("fp8").model_dump() | {"activation_quant": "x"})
    assert "activation_quant" in str(err.value)
