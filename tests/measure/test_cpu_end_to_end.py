"""Scenario X5 on real hardware: forecast ResNet-18 and GPT-2 small forwards on this CPU from
a torch microbenchmark sweep (target-measured tier), then run them with torch and compare.

Timings are ratios (forecast / measured), never milliseconds, checked against the bounds in
cpu_end_to_end_tolerance.json. On a shared machine every timing keeps only repeats no other
process interrupted (thread CPU time ~ wall time), and retries when too few were. Skipped
when torch is not installed (`pip install 'perfcast[torch]'`)."""

import json
from pathlib import Path

import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from perfcast.compose import step_time  # noqa: E402
from perfcast.kernels import (  # noqa: E402
    TARGET_MEASURED,
    PhysicsModel,
    add_target_corrections,
    shipped_calibration,
)
from perfcast.measure import (  # noqa: E402
    TORCH_OPS,
    local_cpu_device,
    measure_torch_dispatch_s,
    run_torch_cpu_sweep,
)
from perfcast.measure.torch_models import (  # noqa: E402
    gpt2_case,
    kernels_alone_s,
    measure_forward_s,
    reference_s,
    resnet18_case,
    slowdown,
    traced_ops,
)
from perfcast.ops import cnn_ops, eager_ops  # noqa: E402
from perfcast.specs import Precision, cluster_for, get_model  # noqa: E402

pytestmark = pytest.mark.cpu_timing  # run alone, after the rest (tests/conftest.py)

TOLERANCE = json.loads((Path(__file__).with_name("cpu_end_to_end_tolerance.json")).read_text())
FP32 = Precision.uniform("fp32")
CASES = {
    "resnet18": (lambda: cnn_ops("resnet18", 1, 224), resnet18_case),
    "gpt2": (lambda: eager_ops(get_model("gpt2"), 1, 128, precision=FP32), gpt2_case),
}


def swept_ops() -> list[str]:
    """The ops the cases launch (as `perfcast cpu` sweeps them): the others' rows would
    correct families no forecast here prices."""
    ops = pd.concat([table() for table, _ in CASES.values()])
    return sorted(set(ops["op"].str.split(":").str[0]) & set(TORCH_OPS))


def quiet_sweep(tries: int = 3):
    """A quick torch sweep of the cases' ops during which the CPU's speed held steady (the
    reference kernels timed before and after agree within 10%), and the reference times
    then: the machine state every later measurement is compared with."""
    for _ in range(tries):
        before = reference_s()
        sweep = run_torch_cpu_sweep(quick=True, seed=0, ops=swept_ops())
        after = reference_s()
        if slowdown(before, after) <= 1.1 and slowdown(after, before) <= 1.1:
            break
    return sweep, tuple(min(b, a) for b, a in zip(before, after, strict=True))


@pytest.fixture(scope="module")
def target():
    """The local CPU calibrated on a quick torch sweep, torch's dispatch cost, and the
    reference-kernel time of the sweep's machine state."""
    sweep, baseline = quiet_sweep()
    device = local_cpu_device()
    cal = add_target_corrections(shipped_calibration(), sweep, devices={device.name: device})
    return device, PhysicsModel(cal), measure_torch_dispatch_s(), baseline


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, target):
    device, model, dispatch_s, baseline = target
    table, build = CASES[request.param]
    ops = table()
    forecast = step_time(ops, cluster_for(device, 1), execution="eager", time_model=model,
                         dispatch_s=dispatch_s)
    net, inputs = build()
    return request.param, ops, forecast, net, inputs, baseline


def test_the_sweep_puts_the_cpu_in_the_target_measured_tier(target):
    device, model, dispatch_s, _ = target
    assert model.tier(device) == TARGET_MEASURED
    assert model.calibration.tier_for(device.name) == TARGET_MEASURED
    assert 0 < dispatch_s < 1e-4


def test_forecast_is_within_tolerance_of_the_measured_forward(case):
    name, _, forecast, net, inputs, baseline = case
    measured = measure_forward_s(net, inputs, baseline, repeats=5)
    ratio = forecast.time_s / measured["seconds"]
    low, high = TOLERANCE[name]["ratio"]
    print(f"\n{name}: forecast {forecast.time_s * 1e3:.2f} ms, measured "
          f"{measured['seconds'] * 1e3:.2f} ms, ratio {ratio:.3f} ({measured})")
    assert low <= ratio <= high, (name, ratio, measured)


def test_the_torch_model_launches_the_kernels_its_op_table_lists(case):
    _, ops, _, net, inputs, _ = case
    traced = pd.Series(traced_ops(net, inputs)).value_counts()
    listed = ops.assign(op=ops["op"].str.split(":").str[0]).groupby("op")["count"].sum()
    assert traced.to_dict() == listed.to_dict()


def per_family_errors(ops: pd.DataFrame, forecast, net, inputs) -> pd.DataFrame:
    """Forecast vs each kernel timed alone, summed per family, largest gap first."""
    alone = pd.DataFrame(kernels_alone_s(net, inputs), columns=["op", "seconds"])
    measured = alone.assign(family=alone["op"].map(TORCH_OPS)).groupby("family")["seconds"]
    out = pd.DataFrame({"forecast_ms": forecast.ops.groupby("family")["total_s"].sum() * 1e3,
                        "alone_ms": measured.sum() * 1e3})
    out["ratio"] = out["forecast_ms"] / out["alone_ms"]
    out["gap_ms"] = out["forecast_ms"] - out["alone_ms"]
    return out.sort_values("gap_ms", key=abs, ascending=False)


def test_per_family_errors_are_reported_and_the_big_families_are_close(case):
    name, ops, forecast, net, inputs, _ = case
    errors = per_family_errors(ops, forecast, net, inputs)
    print(f"\n{name}: forecast vs kernels timed alone, per family\n{errors.round(3)}")
    dominant = errors["alone_ms"] >= 0.5 * errors["alone_ms"].sum()  # conv / gemm
    assert dominant.any()
    low, high = TOLERANCE[name]["dominant_family_ratio"]
    assert errors.loc[dominant, "ratio"].between(low, high).all(), errors
