"""The learned kernel model (perfcast.kernels._learned): fit, storage, envelope and fallback."""

import json
from importlib import resources

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.errors import InputError
from perfcast.kernels import (
    LearnedKernels,
    LearnedTimeModel,
    PhysicsModel,
    add_learned_targets,
    fit_calibration,
    fit_learned,
    kernel_features,
    measurement_ops,
    roofline_times,
    shipped_calibration,
    shipped_learned,
)
from perfcast.kernels._conformal import SCHEMA3_FEATURES
from perfcast.kernels._learned import TARGET_MIN_ROWS, _booster, _encode
from perfcast.measure import load_store, sample_per_group
from perfcast.specs import get_device

DEVICES = ("a100-sxm4-80gb", "h100-sxm", "h200-sxm")
OUTSIDE = "l40s"  # outside hopper_trees' spec-sheet range (the target-tier tests)


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    store = load_store()
    keep = (store["source"] == "aiconfigurator") & store["device"].isin(DEVICES) & \
        store["family"].isin(["gemm", "attn_decode"])
    return sample_per_group(store[keep.to_numpy()], 100, 0)


@pytest.fixture(scope="module")
def fitted(rows):
    return fit_learned(rows, rounds=40, interval_folds=3)


@pytest.fixture(scope="module")
def physics(rows):
    return PhysicsModel(fit_calibration(rows))


def _ops(rows: pd.DataFrame, device: str) -> tuple[pd.DataFrame, np.ndarray]:
    part = rows[rows["device"] == device]
    return measurement_ops(part), part["timing"].to_numpy(dtype=object)


def test_fit_is_deterministic_and_round_trips(rows, fitted, physics):
    again = fit_learned(rows, rounds=40, interval_folds=3)
    assert again.to_json() == fitted.to_json()
    loaded = LearnedKernels.from_json(fitted.to_json())
    ops, timing = _ops(rows, "h100-sxm")
    device = get_device("h100-sxm")
    a = LearnedTimeModel(fitted, physics).kernel_times(ops, device, timing)
    b = LearnedTimeModel(loaded, physics).kernel_times(ops, device, timing)
    assert np.array_equal(a, b)


def test_intervals_are_per_family_and_ordered(fitted):
    assert set(fitted.intervals) == {"gemm", "attn_decode"}
    for lo, hi in fitted.intervals.values():
        assert lo < 0 < hi


def test_inside_the_envelope_the_trees_price(rows, fitted, physics):
    ops, timing = _ops(rows, "h200-sxm")
    device = get_device("h200-sxm")
    model = LearnedTimeModel(fitted, physics)
    learned = model.kernel_times(ops, device, timing)
    assert not model.extrapolating(ops, device, timing).any()
    assert np.all(np.isfinite(learned)) and np.all(learned > 0)
    assert not np.allclose(learned, physics.kernel_times(ops, device, timing))
    # the correction stays within the per-family bounds seen in training
    ratio = np.log(learned / roofline_times(ops, device, waves=True))
    for family, (lo, hi) in fitted.clip.items():
        sel = (ops["family"] == family).to_numpy()
        assert np.all(ratio[sel] >= lo - 1e-9) and np.all(ratio[sel] <= hi + 1e-9)


@pytest.mark.parametrize("name", ["l4", "mi300x", "epyc-9654"])
def test_outside_the_envelope_the_physical_model_prices(rows, fitted, physics, name):
    """A GPU whose spec sheet lies outside the trees' range (L4: a seventh of A100's
    bandwidth),
    one with no tensor-core generation on the scale (MI300X) and a CPU are priced exactly as
    the physical model prices them, and device_coverage says why."""
    ops, timing = _ops(rows, "h100-sxm")
    device = get_device(name)
    runs = ops["dtype"].isin([str(getattr(d, "value", d)) for d in device.dtypes]).to_numpy()
    ops, timing = ops[runs], timing[runs]  # the dtypes the device has a peak for
    model = LearnedTimeModel(fitted, physics)
    assert len(ops) and model.extrapolating(ops, device, timing).all()
    assert np.array_equal(model.kernel_times(ops, device, timing),
                          physics.kernel_times(ops, device, timing))
    assert fitted.device_coverage(device)["gemm"].startswith("physical model")
    assert model.tier(device) == physics.tier(device)


def test_a_family_the_trees_never_saw_stays_physical(rows, fitted, physics):
    ops, timing = _ops(rows, "h100-sxm")
    norm = ops.assign(family="norm", op="input_layernorm")
    device = get_device("h100-sxm")
    assert np.array_equal(LearnedTimeModel(fitted, physics).kernel_times(norm, device, timing),
                          physics.kernel_times(norm, device, timing))
    assert fitted.device_coverage(device)["gemm"] == "learned"


def test_a_generation_the_trees_never_saw_is_priced_by_them(rows, fitted, physics):
    """B200 (Blackwell) beside trees fitted on Ampere and Hopper: its spec sheet lies within
    an octave of theirs, so the trees price its shapes (they carry shape effects; stay flat
    beyond their data), device_coverage says it is beyond the trained generations, and its
    forecasts take the learned uncertainty tier."""
    ops, timing = _ops(rows, "h100-sxm")
    device = get_device("b200-sxm")
    model = LearnedTimeModel(fitted, physics)
    assert model.extrapolating(ops, device, timing).mean() < 0.1
    got = model.kernel_times(ops, device, timing)
    assert np.all(np.isfinite(got)) and np.all(got > 0)
    assert not np.allclose(got, physics.kernel_times(ops, device, timing))
    assert fitted.device_coverage(device)["gemm"] == \
        "learned, beyond the trained generations 8-9 (Blackwell)"
    assert model.tier(device) == "learned"


def test_measured_families_stay_with_the_fallback(rows, fitted, physics):
    ops, timing = _ops(rows, "h100-sxm")
    device = get_device("h100-sxm")
    model = LearnedTimeModel(fitted, physics, measured_families=frozenset({"gemm"}))
    gemm = (ops["family"] == "gemm").to_numpy()
    got, phys = model.kernel_times(ops, device, timing), physics.kernel_times(ops, device, timing)
    assert np.array_equal(got[gemm], phys[gemm])
    assert not np.allclose(got[~gemm], phys[~gemm])


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 1 << 16), n=st.integers(1, 1 << 15), k=st.integers(16, 1 << 15))
def test_gemm_forecasts_are_finite_and_positive(m, n, k):
    """Any GEMM shape on a shipped device: a finite positive time, never below the
    roofline by more than the trained clip allows."""
    model = LearnedTimeModel(shipped_learned(), PhysicsModel(shipped_calibration()))
    ops = pd.DataFrame([{"layer": "x", "op": "gemm", "family": "gemm", "phase": "p", "b": 1,
                         "m": float(m), "n": float(n), "k": float(k), "flops": 2.0 * m * n * k,
                         "bytes_read": 2.0 * (m * k + n * k), "bytes_written": 2.0 * m * n,
                         "dtype": "bf16", "count": 1}])
    device = get_device("h100-sxm")
    t = model.kernel_times(ops, device)
    assert np.isfinite(t).all() and (t > 0).all()
    lo = shipped_learned().clip["gemm"][0]
    assert t[0] >= roofline_times(ops, device, waves=True)[0] * np.exp(lo) * (1 - 1e-9)


def test_shipped_models_load_with_provenance():
    for source in ("default", "vllm", "sglang"):
        model = shipped_learned(source)
        assert model.provenance["kernel_source"] == source
        assert model.seconds_booster_text and "targets" in model.provenance
        assert model.interval_scale is not None  # schema 3
        assert {"gemm", "attn_prefill", "attn_decode"} <= set(model.envelope)


def test_old_or_foreign_files_are_refused(fitted):
    data = json.loads(fitted.to_json())
    data["schema_version"] = 99
    with pytest.raises(InputError, match="schema_version"):
        LearnedKernels.from_json(json.dumps(data))
    with pytest.raises(InputError, match="kernel_source"):
        shipped_learned("nope")


def _schema_1(model: LearnedKernels) -> LearnedKernels:
    """`model` as a schema-1 file held it: the ratio trees alone."""
    data = json.loads(model.to_json())
    data["schema_version"] = 1
    del data["seconds_booster"]
    return LearnedKernels.from_json(json.dumps(data))


def test_schema_1_files_still_load_and_price_with_the_ratio_trees_alone(rows, fitted, physics):
    """A file written before the seconds trees (schema 1) prices t = roofline·waves ×
    exp(clip(r)), as it did when it was fitted; it round-trips as schema 1."""
    old = _schema_1(fitted)
    assert json.loads(old.to_json())["schema_version"] == 1 and not old.seconds_booster_text
    ops, timing = _ops(rows, "h200-sxm")
    device = get_device("h200-sxm")
    roof = roofline_times(ops, device, waves=True)
    got = LearnedTimeModel(old, physics).kernel_times(ops, device, timing)
    feats = kernel_features(ops, device, timing)
    raw = old.booster().predict(_encode(feats, old.categories))
    lo, hi = (np.array([old.clip[f][i] for f in ops["family"]]) for i in (0, 1))
    assert np.allclose(got, roof * np.exp(np.clip(raw, lo, hi)), rtol=1e-12)
    assert not np.allclose(got, LearnedTimeModel(fitted, physics).kernel_times(ops, device,
                                                                              timing))


def test_a_file_without_its_seconds_trees_or_interval_scale_is_refused(fitted):
    data = json.loads(fitted.to_json())
    assert data["schema_version"] == 4
    for key in ("seconds_booster", "interval_scale"):
        broken = {k: v for k, v in data.items() if k != key}
        with pytest.raises(InputError, match=key):
            LearnedKernels.from_json(json.dumps(broken))


def test_the_shipped_schema_3_file_loads_prices_and_round_trips_as_fitted():
    """The shipped trees were fitted when the novelty had five spec-sheet features (schema
    3): they load with those, measure novelty over them and write back byte for byte."""
    text = (resources.files("perfcast.kernels") / "data" / "learned.json").read_text()
    assert json.loads(text)["schema_version"] == 3
    model = LearnedKernels.from_json(text)
    assert model.interval_scale.features == SCHEMA3_FEATURES
    assert model.to_json() == text


def test_schema_2_files_still_load_with_their_bands_unscaled(rows, fitted, physics):
    """A file written before the novelty scale (schema 2) stored bands of log error as they
    were: it prices as before and its bands are used as stored, on every device."""
    data = json.loads(fitted.to_json())
    data["schema_version"] = 2
    del data["interval_scale"]
    old = LearnedKernels.from_json(json.dumps(data))
    assert old.interval_scale is None and json.loads(old.to_json())["schema_version"] == 2
    for name in ("h100-sxm", "l40s"):
        device = get_device(name)
        ops = measurement_ops(rows[rows["device"] == "h100-sxm"])
        bounds = LearnedTimeModel(old, physics).log_bounds(ops, device)
        stored = np.array([old.intervals[f] for f in ops["family"]])
        priced = np.isfinite(bounds).all(axis=1)
        assert priced.any() and np.array_equal(bounds[priced], stored[priced])
    ops, timing = _ops(rows, "h100-sxm")
    device = get_device("h100-sxm")
    assert np.array_equal(LearnedTimeModel(old, physics).kernel_times(ops, device, timing),
                          LearnedTimeModel(fitted, physics).kernel_times(ops, device, timing))


def test_bands_widen_with_distance_from_the_fitted_gpus(rows, fitted, physics):
    """The band of one kernel is its family's normalised band times sigma = a + b x novelty:
    on a fitted GPU (novelty 0) sigma is a; on one farther from them, no narrower."""
    scale = fitted.interval_scale
    assert scale is not None and scale.a > 0 and scale.b >= 0
    ops = measurement_ops(rows[rows["device"] == "h100-sxm"].head(50))
    model = LearnedTimeModel(fitted, physics)
    near = model.log_bounds(ops, get_device("h100-sxm"))
    far = model.log_bounds(ops, get_device("l40s"))
    stored = np.array([fitted.intervals[f] for f in ops["family"]])
    assert np.allclose(near, stored * scale.a)
    both = np.isfinite(far).all(axis=1)
    assert both.any() and (far[both, 1] - far[both, 0] >= near[both, 1] - near[both, 0]).all()


@settings(max_examples=40, deadline=None)
@given(shift=st.floats(-20.0, 20.0))
def test_the_blend_weights_the_seconds_trees_by_the_predicted_efficiency(rows, fitted, shift):
    """w = min(1, exp(-r)): where r says a kernel runs at its roofline (r <= 0) the ratio
    trees alone price it; below it the seconds trees take the rest of the weight; and the
    blend never leaves the family's clip bounds, whatever roofline it is handed."""
    ops, timing = _ops(rows, "h100-sxm")
    device = get_device("h100-sxm")
    feats = kernel_features(ops, device, timing)
    x = _encode(feats, fitted.categories)
    fams = feats["family"].to_numpy(dtype=object)
    lo, hi = (np.array([fitted.clip[f][i] for f in fams]) for i in (0, 1))
    r = np.clip(fitted.booster().predict(x), lo, hi)
    seconds = _booster(fitted.seconds_booster_text).predict(x)
    log_roof = np.log(roofline_times(ops, device, waves=True)) + shift
    got = fitted.log_correction(feats, log_roof)
    w = np.minimum(np.exp(-r), 1.0)
    assert np.allclose(got, np.clip(w * r + (1 - w) * (seconds - log_roof), lo, hi))
    assert np.all(got >= lo - 1e-12) and np.all(got <= hi + 1e-12)
    at_roof = r <= 0
    assert np.array_equal(got[at_roof], r[at_roof])


def test_repeated_rows_are_priced_as_each_alone(rows, fitted, physics):
    """Pricing a table with repeated kernels (priced once each) equals pricing each row."""
    ops, timing = _ops(rows, "h100-sxm")
    device = get_device("h100-sxm")
    model = LearnedTimeModel(fitted, physics)
    order = np.random.default_rng(0).integers(0, len(ops), 3 * len(ops))
    repeated = ops.iloc[order].reset_index(drop=True)
    once = model.kernel_times(ops, device, timing)
    assert np.array_equal(model.kernel_times(repeated, device, timing[order]), once[order])


def test_kernel_model_learned_through_the_api():
    """`--kernel-model learned` reaches the forecast: a different, finite price than the
    calibrated model's, the learned tier, and where the trees apply on the device."""
    from perfcast.api import InferRequest, StepRequest, run

    opts = {"model": "llama-2-7b", "gpu": "h100-sxm", "prompt_tokens": 512,
            "output_tokens": 64}
    cal = run(InferRequest.from_options(**opts))
    learned = run(InferRequest.from_options(**opts, kernel_model="learned"))
    info = learned.inputs["kernel_model"]
    assert info["name"] == "learned" and info["tier"] == "learned"
    assert info["learned_envelope"]["gemm"] == "learned"
    assert np.isfinite(learned.forecast.ttft_s) and learned.forecast.ttft_s != cal.forecast.ttft_s
    step = run(StepRequest.from_options(model="llama-2-7b", gpu="h100-sxm", batch=1,
                                        seq_len=512, kernel_model="learned"))
    assert step.inputs["kernel_model"]["name"] == "learned" and step.time_s > 0
    with pytest.raises(InputError, match="kernel_model"):
        run(InferRequest.from_options(**opts, kernel_model="neural"))


def test_cli_says_where_the_trees_price_and_refuses_unknown_models():
    """The table output names the families the physical model prices on a GPU outside the
    trees' envelope (B200: the vector kernels were fitted on GPUs of at most 3.35 TB/s); an
    unknown --kernel-model is refused with exit 2, naming the allowed values."""
    from typer.testing import CliRunner

    from perfcast.cli import app

    runner = CliRunner()
    out = runner.invoke(app, ["infer", "--model", "llama-2-7b", "--gpu", "b200-sxm",
                              "--kernel-model", "learned"])
    assert out.exit_code == 0, out.output
    line = next(x for x in out.output.splitlines() if x.startswith("learned kernel model"))
    assert "trees for" in line and "gemm" in line and "physical model" in line
    bad = runner.invoke(app, ["infer", "--model", "llama-2-7b", "--gpu", "h100-sxm",
                              "--kernel-model", "neural"])
    assert bad.exit_code == 2 and "learned" in bad.output


# --- the target-measured tier: a device's own residual (DeviceResidual) -------------------


@pytest.fixture(scope="module")
def hopper_trees(rows) -> LearnedKernels:
    """Trees fitted on the Hopper GPUs alone: L40S's memory bandwidth (0.86 TB/s) lies more
    than the envelope's slack below theirs (3.35-4.8 TB/s)."""
    return fit_learned(rows[rows["device"].isin(["h100-sxm", "h200-sxm"])], rounds=40,
                       interval_folds=0)


@pytest.fixture(scope="module")
def outside_rows() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(a sample of L40S's rows to fit its residual on, the rest to score): a GPU outside
    `hopper_trees`' envelope."""
    store = load_store()
    keep = (store["source"] == "aiconfigurator") & (store["device"] == OUTSIDE) & \
        store["family"].isin(["gemm", "attn_decode"])
    part = sample_per_group(store[keep.to_numpy()], 160, 0)
    pick = np.random.default_rng(0).random(len(part)) < 0.5
    return part[pick], part[~pick]


def _mape(rows: pd.DataFrame, pred: np.ndarray) -> float:
    meas = rows["latency_s"].to_numpy(dtype=float)
    return float(np.mean(np.abs(pred - meas) / meas))


def test_own_rows_bring_a_device_outside_inside_and_closer(hopper_trees, physics, outside_rows):
    """L40S is outside the Hopper trees' envelope (physics prices it); fitted with half of
    its own rows, the residual brings the rest inside, and prices them closer to measured
    than the physical model does."""
    sample, held = outside_rows
    device = get_device(OUTSIDE)
    ops, timing = measurement_ops(held), held["timing"].to_numpy(dtype=object)
    before = LearnedTimeModel(hopper_trees, physics)
    assert before.extrapolating(ops, device, timing).all()
    tuned = add_learned_targets(hopper_trees, sample)
    after = LearnedTimeModel(tuned, physics)
    assert after.extrapolating(ops, device, timing).mean() < 0.1
    assert tuned.device_coverage(device)["gemm"] == "learned, with the device's own measured rows"
    assert hopper_trees.device_coverage(device)["gemm"].startswith("physical model")
    got = after.kernel_times(ops, device, timing)
    assert _mape(held, got) < 0.8 * _mape(held, physics.kernel_times(ops, device, timing))


def test_device_residuals_are_deterministic_and_round_trip(hopper_trees, physics, outside_rows):
    sample, held = outside_rows
    tuned = add_learned_targets(hopper_trees, sample)
    assert add_learned_targets(hopper_trees, sample).to_json() == tuned.to_json()
    own = tuned.device_residual(OUTSIDE)
    assert own.booster_text and set(own.families) <= {"gemm", "attn_decode"}
    loaded = LearnedKernels.from_json(tuned.to_json())
    device, ops = get_device(OUTSIDE), measurement_ops(held)
    timing = held["timing"].to_numpy(dtype=object)
    assert np.array_equal(LearnedTimeModel(loaded, physics).kernel_times(ops, device, timing),
                          LearnedTimeModel(tuned, physics).kernel_times(ops, device, timing))


def test_old_device_entries_load_as_nearest_shape_residuals(rows, hopper_trees, physics,
                                                           outside_rows):
    """A file written before the residual trees holds a NeighbourResidual's dict per device:
    it still loads and prices as before (the trees' forecast times the interpolated
    residual), and widens no envelope."""
    sample, _ = outside_rows
    tuned = add_learned_targets(hopper_trees,
                                pd.concat([sample, rows[rows["device"] == "h200-sxm"]]))
    old = LearnedKernels.from_json(json.dumps({
        **json.loads(tuned.to_json()),
        "devices": {d: e["neighbour"] for d, e in json.loads(tuned.to_json())["devices"].items()},
    }))
    ops, timing = _ops(rows, "h200-sxm")
    device = get_device("h200-sxm")
    own = old.device_residual("h200-sxm")
    assert own.booster_text == "" and own.envelope == {}
    variant = kernel_features(ops, device, timing)["variant"].to_numpy(dtype=object)
    expected = LearnedTimeModel(hopper_trees, physics).kernel_times(
        ops, device, timing) * np.exp(own.neighbour.correction(ops, variant))
    assert np.allclose(LearnedTimeModel(old, physics).kernel_times(ops, device, timing),
                       expected, rtol=1e-12)
    outside = measurement_ops(sample)
    assert LearnedTimeModel(old, physics).extrapolating(
        outside, get_device(OUTSIDE), sample["timing"].to_numpy(dtype=object)).all()


def test_residual_trees_correct_only_what_the_device_measured(rows, fitted, physics):
    """Own rows of one family (gemm) leave another family's forecast (attn_decode) on that
    device exactly as the trees alone price it; fewer than TARGET_MIN_ROWS rows fit no
    residual trees."""
    h200 = rows[rows["device"] == "h200-sxm"]
    tuned = add_learned_targets(fitted, h200[h200["family"] == "gemm"])
    ops, timing = _ops(rows, "h200-sxm")
    device = get_device("h200-sxm")
    attn = (ops["family"] == "attn_decode").to_numpy()
    got = LearnedTimeModel(tuned, physics).kernel_times(ops, device, timing)
    base = LearnedTimeModel(fitted, physics).kernel_times(ops, device, timing)
    assert np.array_equal(got[attn], base[attn])
    assert not np.allclose(got[~attn], base[~attn])
    few = add_learned_targets(fitted, h200.head(TARGET_MIN_ROWS - 1))
    own = few.device_residual("h200-sxm")
    assert own.booster_text == "" and own.families == ()
    assert set(own.envelope) == set(h200.head(TARGET_MIN_ROWS - 1)["family"])  # still widens
    assert fitted.device_residual("h200-sxm") is None
