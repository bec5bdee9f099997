"""The physical model prices each distinct kernel of a table once: a row's time is a function of
its priced columns and timing alone, so a table with repeats prices exactly (bit for bit) as
its rows do without them."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.kernels import PhysicsModel, shipped_calibration
from perfcast.kernels._calibration import _PRICED, _distinct_rows
from perfcast.ops import Batch, step_ops
from perfcast.specs import ParallelPlan, Precision, get_device, get_model


@pytest.fixture(scope="module")
def tables() -> list[pd.DataFrame]:
    fp8 = Precision(weights="fp8", activations="fp8", activation_quant="fused")
    return [step_ops(get_model("llama-2-7b"), Batch(prefill_tokens=(512,), decode_context=(900,))),
            step_ops(get_model("mixtral-8x7b"), Batch.decode(16, 2048), fp8, ParallelPlan(tp=2)),
            step_ops(get_model("qwen3-0.6b"), Batch.prefill(2, 300),
                     Precision(weights="fp32", activations="fp32", kv_cache="fp32"))]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["h100-sxm", "b200-sxm", "l40s"]))
def test_repeats_price_as_the_rows_alone(tables, seed, device):
    rng = np.random.default_rng(seed)
    model, gpu = PhysicsModel(shipped_calibration()), get_device(device)
    base = pd.concat(tables, ignore_index=True)
    timing = rng.choice(["cuda_graph", "cuda_event"], len(base)).astype(object)
    alone = model.kernel_times(base, gpu, timing)  # every row distinct: no repeat to share
    assert len(_distinct_rows(base, timing)[1]) == len(base)
    pick = rng.integers(0, len(base), 3 * len(base))
    repeated = model.kernel_times(base.iloc[pick].reset_index(drop=True), gpu, timing[pick])
    assert repeated.tobytes() == alone[pick].tobytes()


@given(st.integers(0, 2**32 - 1), st.integers(1, 400), st.integers(2, 300))
def test_distinct_rows_are_the_distinct_tuples(seed, rows, values):
    """Codes agree with a dict of row tuples, also when the columns' value counts multiply
    past int64 (the key is renumbered on the way)."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({c: rng.integers(0, values, rows).astype(float) for c in _PRICED})
    for c in ("op", "family", "dtype"):
        frame[c] = frame[c].astype(int).astype(str).astype(object)
    frame.loc[rng.random(rows) < 0.05, "k"] = np.nan
    timing = rng.choice(["cuda_graph", "cpu_wallclock"], rows).astype(object)
    codes, first = _distinct_rows(frame, timing)
    seen: dict[tuple, int] = {}
    for i, row in enumerate(zip(*(frame[c] for c in _PRICED), timing, strict=True)):
        key = tuple("nan" if isinstance(v, float) and np.isnan(v) else v for v in row)
        assert codes[i] == seen.setdefault(key, len(seen))
    assert list(first) == sorted({c: i for i, c in reversed(list(enumerate(codes)))}.values())


def test_an_empty_table_prices_to_nothing(tables):
    model = PhysicsModel(shipped_calibration())
    assert len(model.kernel_times(tables[0].iloc[:0], get_device("h100-sxm"))) == 0
