"""`perfcast.api` for `measure` and `calibrate`: the requests' defaults are the CLI's, checks
are InputErrors naming the option, and the CLI prints the payload of the result `run` returns.

`measure` times this machine, so two sweeps agree in shape (rows, files, keys) but not in
timings: a run through Python and one through the CLI are compared on everything not timed,
and the CLI is checked against one measured result (the registered command answers with it).
`calibrate` is deterministic given its file, so its payloads are compared whole."""

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from perfcast.api import (
    COMMANDS,
    CalibrateRequest,
    CalibrateResult,
    MeasureRequest,
    MeasureResult,
    resolve,
    run,
)
from perfcast.cli import app
from perfcast.errors import InputError
from perfcast.measure import STORE_COLUMNS
from perfcast.specs import Device

QUICK = {"quick": True, "repeats": 1}


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> MeasureResult:
    """One quick numpy sweep of this CPU through `run` (about a second)."""
    out = tmp_path_factory.mktemp("measure") / "api.csv"
    return run(MeasureRequest.from_options(out=out, **QUICK))


def test_defaults_are_the_cli_defaults():
    assert MeasureRequest.from_options(out="m.csv").options() == {
        "device": "cpu", "backend": None, "model": None, "model_config": None, "stack": None,
        "batch": 1, "seq_len": 128, "context": None, "dtype": None, "optimizer": "adam",
        "modes": None, "runners": None, "quick": False, "repeats": 5, "seed": 0,
        "out": Path("m.csv"), "force": False}
    assert CalibrateRequest.from_options(measurements="m.csv", device="h100-sxm",
                                         out="c.json").options() == {
        "measurements": Path("m.csv"), "device": "h100-sxm", "device_spec": None,
        "stack": None, "steps": None, "folds": 5, "seed": 0, "out": Path("c.json"),
        "force": False}


def test_measure_through_run_writes_the_files(measured):
    written = pd.read_csv(measured.path, keep_default_na=False)
    assert list(written.columns) == list(STORE_COLUMNS)
    assert len(written) == len(measured.measurements) == int(measured.summary["rows"].sum())
    assert measured.device == "local-cpu" and measured.device_spec.name == "local-cpu"
    assert measured.device_path == measured.path.with_name("api.csv.device.json")
    assert Device.model_validate_json(measured.device_path.read_text()) == measured.device_spec


def test_measure_payload_has_the_structure_the_cli_prints(measured, tmp_path):
    out = tmp_path / "cli.csv"
    res = _cli("measure", "--out", str(out), "--quick", "--repeats", "1", "--json")
    assert res.exit_code == 0, res.output
    printed = json.loads(res.stdout)
    payload = json.loads(json.dumps(measured.payload()))
    assert list(payload) == list(printed)
    assert printed["path"] == str(out) and printed["device_path"] == f"{out}.device.json"
    for key in ("rows", "device"):
        assert payload[key] == printed[key], key
    assert list(payload["device_spec"]) == list(printed["device_spec"])
    for key in ("name", "kind", "arch", "sm_count"):
        assert payload["device_spec"][key] == printed["device_spec"][key], key
    assert [(r["family"], r["dtype"], r["rows"]) for r in payload["summary"]] == [
        (r["family"], r["dtype"], r["rows"]) for r in printed["summary"]]
    assert [list(r) for r in payload["summary"]] == [list(r) for r in printed["summary"]]


def test_the_cli_prints_the_payload_of_the_run(measured, monkeypatch, tmp_path):
    """The CLI builds the request `from_options` builds and prints the result's payload."""
    out = str(tmp_path / "m.csv")
    request = MeasureRequest.from_options(out=out, **QUICK)
    asked = []

    def answer(resolved):
        asked.append(resolved.request)
        return measured

    monkeypatch.setitem(COMMANDS, "measure", replace(COMMANDS["measure"], execute=answer))
    res = _cli("measure", "--out", out, "--quick", "--repeats", "1", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == json.loads(json.dumps(measured.payload()))
    table = _cli("measure", "--out", out, "--quick", "--repeats", "1")
    assert table.exit_code == 0 and "GFLOP/s p50" in table.stdout
    assert f"wrote {measured.path}" in table.stdout.replace("\n", "")
    assert asked == [request, request]


def test_calibrate_payload_is_what_the_cli_prints(measured, tmp_path):
    out = tmp_path / "cpu-calibration.json"
    options = {"measurements": measured.path, "device": "local-cpu",
               "device_spec": measured.device_path, "out": out}
    result = run(CalibrateRequest.from_options(options))
    assert isinstance(result, CalibrateResult) and result.rows.shape[0] == len(
        measured.measurements)
    written = out.read_text()
    argv = ["calibrate", "--measurements", str(measured.path), "--device", "local-cpu",
            "--device-spec", str(measured.device_path), "--out", str(out), "--force"]
    res = _cli(*argv, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == json.loads(json.dumps(result.payload()))
    assert out.read_text() == written
    line = _cli(*argv)
    assert line.exit_code == 0
    assert "shipped held-out" in line.stdout and f"wrote {out}" in line.stdout.replace(
        "\n", "")
    assert result.payload()["stack"] is None  # numpy kernels: no framework stack


@pytest.mark.parametrize("options, field, text", [
    ({"out": "m.xlsx"}, "out", "unknown file type '.xlsx'"),
    ({"out": "no/such/dir/m.csv"}, "out", "does not exist"),
    ({"out": "m.csv", "device": "tpu"}, "device", "unknown device 'tpu'"),
    ({"out": "m.csv", "backend": "jax"}, "backend", "unknown backend 'jax'"),
    ({"out": "m.csv", "device": "cuda", "backend": "numpy"}, "backend", "timed with torch"),
])
def test_bad_measure_input_names_the_option(options, field, text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as err:
        resolve(MeasureRequest.from_options(options))
    assert err.value.field == field and text in str(err.value)


def test_measure_never_overwrites_without_force(tmp_path):
    for existing in ("m.csv", "m.csv.device.json"):
        (tmp_path / existing).write_text("keep me")
        with pytest.raises(InputError, match="--force") as err:
            resolve(MeasureRequest.from_options(out=tmp_path / "m.csv"))
        assert err.value.field == "out"
    assert resolve(MeasureRequest.from_options(out=tmp_path / "m.csv", force=True)).out == (
        tmp_path / "m.csv")


@pytest.mark.parametrize("command, options, field", [
    ("measure", {}, "out"),
    ("measure", {"out": "m.csv", "repeats": "x"}, "repeats"),
    ("calibrate", {"device": "h100-sxm", "out": "c.json"}, "measurements"),
    ("calibrate", {"measurements": "m.csv", "out": "c.json"}, "device"),
])
def test_missing_or_malformed_options_are_named(command, options, field):
    cls = MeasureRequest if command == "measure" else CalibrateRequest
    with pytest.raises(InputError) as err:
        cls.from_options(options)
    assert err.value.field == field


def test_bad_calibrate_input_names_the_option(measured, tmp_path):
    existing = tmp_path / "exists.json"
    existing.write_text("{}")
    base = {"measurements": measured.path, "device": "h100-sxm", "out": tmp_path / "c.json"}
    for change, field, text in [
        ({"out": existing}, "out", "pass --force"),
        ({"measurements": tmp_path / "none.csv"}, "measurements", "does not exist"),
        ({"measurements": existing}, "measurements", "unsupported suffix"),
        ({}, "device", "no rows for 'h100-sxm'"),
    ]:
        with pytest.raises(InputError) as err:
            resolve(CalibrateRequest.from_options({**base, **change}))
        assert err.value.field == field and text in str(err.value), change
    assert not (tmp_path / "c.json").exists()


def test_a_kernel_faster_than_the_derived_peak_raises_it(tmp_path, monkeypatch):
    """The derived CPU peak uses the clock /proc reports, not the turbo clock: a GEMM the
    sweep timed above it becomes the peak (with its source), so no calibrated forecast is
    clamped to a roofline the machine beats."""
    import perfcast.measure as measure_pkg  # what api._measure runs, looked up per run
    from perfcast.measure import local_cpu_device

    peak = local_cpu_device(threads=1, measure_bandwidth=False).dense_peak_flops["fp32"]
    fast = 2.0 * 512**3 / (peak * 1.5)  # a 512^3 GEMM at 1.5x the derived peak

    def sweep(**_):
        row = dict.fromkeys(STORE_COLUMNS, 0.0) | {
            "source": "local", "source_file": "fake", "split": "", "device": "local-cpu",
            "family": "gemm", "op": "matmul", "dtype": "fp32", "weight_dtype": "fp32",
            "kv_dtype": "", "timing": "cpu_wallclock", "latency_s": fast, "m": 512.0,
            "n": 512.0, "k": 512.0, "b": 1.0, "flops": 2.0 * 512**3, "bytes": 3 * 4 * 512**2}
        return pd.DataFrame([row])

    monkeypatch.setattr(measure_pkg, "run_cpu_sweep", sweep)
    result = run(MeasureRequest.from_options(out=tmp_path / "m.csv", quick=True))
    spec = result.device_spec
    assert spec.dense_peak_flops["fp32"] == pytest.approx(peak * 1.5)
    assert spec.sources["dense_peak_flops.fp32"].startswith("measured: the fastest gemm")
