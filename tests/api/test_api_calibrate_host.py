"""The composition term of a calibration: the host speed fitted on whole measured steps,
kept only when it beats the stack's host model on held-out steps, used by `step` unless
`--host-speed` is given."""

import json

import pandas as pd
import pytest

from perfcast.api import CalibrateRequest, StepRequest, run
from perfcast.kernels import PhysicsModel, measurement_ops, shipped_calibration
from perfcast.measure import load_steps, load_store
from perfcast.specs import get_device

SHAPES = [("forward", 1, 128, None), ("forward", 4, 256, None), ("decode", 1, None, 512),
          ("decode", 8, None, 128)]


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """H100 bf16 GEMMs 1.3x the shipped model, and a kernel-only calibration of them."""
    store = load_store()
    rows = store[(store["device"] == "h100-sxm") & (store["family"] == "gemm")
                 & (store["dtype"] == "bf16")].sample(40, random_state=2)
    base = PhysicsModel(shipped_calibration()).kernel_times(
        measurement_ops(rows), get_device("h100-sxm"), rows["timing"].to_numpy(dtype=object))
    folder = tmp_path_factory.mktemp("host")
    path = folder / "h100.parquet"
    rows.assign(latency_s=base * 1.3).to_parquet(path, index=False)
    kernels = folder / "kernels.json"
    run(CalibrateRequest.from_options(measurements=path, device="h100-sxm", out=kernels))
    return folder, path, kernels


def _step(kernels, mode, batch, seq_len, context, host_speed):
    options = {"model": "gpt2", "gpu": "h100-sxm", "mode": mode, "batch": batch,
               "dtype": "bf16", "stack": "hf-transformers", "calibration": str(kernels)}
    if host_speed is not None:
        options["host_speed"] = host_speed
    options.update({"context": context} if mode == "decode" else {"seq_len": seq_len})
    return run(StepRequest.from_options(options))


def _steps_file(folder, kernels, speed: float, name: str, shapes=SHAPES):
    """Steps 'measured' as the kernel calibration forecasts them on a host `speed` x the
    stack's reference CPU."""
    steps = []
    for mode, batch, seq_len, context in shapes:
        forecast = _step(kernels, mode, batch, seq_len, context, speed)
        steps.append({"mode": mode, "runner": "transformers", "batch": batch,
                      "seq_len": 1 if mode == "decode" else seq_len, "context": context,
                      "optimizer": None, "measured_s": forecast.time_s,
                      "kernels": forecast.step.ops["count"].sum().item()
                      if "count" in forecast.step.ops else 1,
                      "repeats": 5, "quiet": True})
    data = {"schema_version": 1, "model": "gpt2", "model_config": None,
            "stack": "hf-transformers", "attention": "sdpa", "device": "h100-sxm",
            "dtype": "bf16", "host": "test host", "torch": "2.x", "transformers": None,
            "steps": steps, "provenance": {"test": True}}
    path = folder / name
    path.write_text(json.dumps(data))
    load_steps(path)  # a valid steps file
    return path


def test_a_slow_host_is_fitted_and_used(measured, tmp_path):
    folder, rows, kernels = measured
    steps = _steps_file(folder, kernels, 0.4, "slow.steps.json")
    out = tmp_path / "cal.json"
    result = run(CalibrateRequest.from_options(measurements=rows, device="h100-sxm",
                                               steps=steps, out=out))
    host = result.host
    assert host.kept and host.host_speed == pytest.approx(0.4, rel=0.02)
    held = pd.DataFrame(host.steps)
    assert (held["held_out_error"].abs() < 0.02).all()  # others' speed: the same host
    assert (held["kernels_only_error"] < -0.02).any()  # speed 1 was too fast a host
    used = _step(out, "decode", 2, None, 256, None)
    assert used.inputs["host_speed"] == pytest.approx(host.host_speed)
    assert used.inputs["kernel_model"]["host_speed_from"] == "calibration"
    explicit = run(StepRequest.from_options(model="gpt2", gpu="h100-sxm", mode="decode",
                                            context=256, batch=2, dtype="bf16",
                                            calibration=str(out), host_speed=1.0))
    assert explicit.inputs["host_speed"] == 1.0 and explicit.time_s < used.time_s


def test_steps_the_shipped_host_explains_keep_it(measured, tmp_path):
    folder, rows, kernels = measured
    steps = _steps_file(folder, kernels, 1.0, "exact.steps.json")
    result = run(CalibrateRequest.from_options(measurements=rows, device="h100-sxm",
                                               steps=steps, out=tmp_path / "c.json"))
    assert not result.host.kept and result.host.host_speed == 1.0


def test_steps_of_another_device_are_refused(measured, tmp_path):
    folder, rows, kernels = measured
    steps = _steps_file(folder, kernels, 0.5, "other.steps.json")
    data = json.loads(steps.read_text())
    data["device"] = "a100-sxm4-80gb"
    steps.write_text(json.dumps(data))
    from perfcast.errors import InputError
    with pytest.raises(InputError) as err:
        run(CalibrateRequest.from_options(measurements=rows, device="h100-sxm", steps=steps,
                                          out=tmp_path / "c.json"))
    assert err.value.field == "steps" and "a100-sxm4-80gb" in str(err.value)


def test_a_kernel_error_is_not_read_as_a_slow_host(measured, tmp_path):
    """Two long prefills (mostly kernel time) measured 1.5x their forecast, a short decode
    (mostly host time) as forecast: the prefills' error is in the kernels, not the host. Read
    alone a prefill says the host is many times slower; the estimate from the prefills for the
    held-out decode stays near the stack's host model, so the decode keeps its forecast (the
    CI failure of S8: a CPU forward's 40% kernel miss, read as a host 30x slower, made the
    held-out decode 2.5x too slow). The 13% left is the prefills' pull at their kernel error
    (18% from the check's families and the unchecked ones)."""
    folder, rows, kernels = measured
    shapes = [("forward", 32, 1024, None), ("forward", 64, 512, None), ("decode", 1, None, 128)]
    steps = _steps_file(folder, kernels, 1.0, "kernel-miss.steps.json", shapes)
    data = json.loads(steps.read_text())
    for s in data["steps"][:2]:
        s["measured_s"] *= 1.5
    steps.write_text(json.dumps(data))
    host = run(CalibrateRequest.from_options(measurements=rows, device="h100-sxm",
                                             steps=steps, out=tmp_path / "c.json")).host
    prefill, decode = pd.DataFrame(host.steps[:2]), host.steps[2]
    assert (prefill["own_host_speed"] < 0.2).all() and (prefill["host_share"] < 0.1).all()
    assert decode["host_share"] > 0.5
    assert 0.7 < decode["held_out_host_speed"] <= 1.0  # read alone, a prefill says 0.08
    assert abs(decode["held_out_error"]) < 0.2
    assert not host.kept and host.host_speed == 1.0  # held out, no speed beat the model's
