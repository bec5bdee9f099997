"""Novelty-normalised conformal bands (perfcast.kernels._conformal): distance, scale, fit."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.errors import InputError
from perfcast.kernels import kernel_features, measurement_ops
from perfcast.kernels._conformal import (
    NOVELTY_FEATURES,
    SCHEMA3_FEATURES,
    IntervalScale,
    device_points,
    fit_scale,
    novelty,
)
from perfcast.measure import load_store, sample_per_group
from perfcast.specs import get_device

DEVICES = ("a100-sxm4-80gb", "h100-sxm", "h200-sxm", "l40s")


def _feats(devices=DEVICES, per_group: int = 5) -> tuple[pd.DataFrame, np.ndarray]:
    store = load_store()
    keep = (store["source"] == "aiconfigurator") & store["device"].isin(devices) & \
        (store["family"] == "gemm")
    rows = sample_per_group(store[keep.to_numpy()], per_group, 0)
    parts = [kernel_features(measurement_ops(p), get_device(d), p["timing"].to_numpy())
             for d, p in rows.groupby("device")]
    frame = pd.concat(parts)
    return frame, np.concatenate([[d] * len(p) for d, p in rows.groupby("device")])


FEATS, DEVICE = _feats()


def test_a_fitted_gpu_is_at_distance_zero_and_a_new_one_is_not():
    fitted = ~np.isin(DEVICE, ["l40s"])
    points = device_points(FEATS[fitted], DEVICE[fitted])
    nov = novelty(FEATS, points)
    assert np.allclose(nov[fitted], 0.0, atol=1e-5)  # points stored to 6 decimals
    assert (nov[~fitted] > 0.5).all()  # L40S: 2.4x less bandwidth than any of the three


def test_distance_is_to_the_nearest_fitted_gpu():
    """H200 is nearer H100 (the same chip, more bandwidth) than A100."""
    h200 = DEVICE == "h200-sxm"
    to_h100 = novelty(FEATS[h200], device_points(FEATS[DEVICE == "h100-sxm"],
                                                 DEVICE[DEVICE == "h100-sxm"]))
    to_a100 = novelty(FEATS[h200], device_points(FEATS[DEVICE == "a100-sxm4-80gb"],
                                                 DEVICE[DEVICE == "a100-sxm4-80gb"]))
    both = novelty(FEATS[h200], device_points(FEATS[~h200 & (DEVICE != "l40s")],
                                              DEVICE[~h200 & (DEVICE != "l40s")]))
    assert (to_h100 < to_a100).all() and np.allclose(both, to_h100)
    assert np.allclose(to_h100, np.log2(4.8 / 3.35), atol=0.05)  # bandwidth alone differs


def test_a_generation_beyond_the_fitted_ones_adds_its_distance_and_one_between_does_not():
    """H100 against A100 alone is a generation beyond it: an octave in quadrature with the
    spec-sheet distance; L40S (Ada, 8.9) against A100 and H100 lies between their bf16
    generations and is as far as its spec sheet says (per dtype: its FP8 rows are 0.1 of a
    generation behind the only FP8 GPU, H100)."""
    a100 = DEVICE == "a100-sxm4-80gb"
    points = device_points(FEATS[a100], DEVICE[a100])
    h100 = DEVICE == "h100-sxm"
    spec = novelty(FEATS[h100], {d: [p[:5] for p in ps] for d, ps in points.items()},
                   SCHEMA3_FEATURES)
    assert np.allclose(novelty(FEATS[h100], points), np.hypot(spec, 1.0))
    both = np.isin(DEVICE, ["a100-sxm4-80gb", "h100-sxm"])
    points = device_points(FEATS[both], DEVICE[both])
    l40s = (DEVICE == "l40s") & (FEATS["dtype"].astype(str) == "bf16").to_numpy()
    assert l40s.any()
    spec = novelty(FEATS[l40s], {d: [p[:5] for p in ps] for d, ps in points.items()},
                   SCHEMA3_FEATURES)
    assert np.allclose(novelty(FEATS[l40s], points), spec) and (spec > 0.5).all()


def test_a_scale_stored_before_the_generation_counted_prices_as_it_was_fitted():
    """A schema-3 file's scale has five features and five-number points: it loads and
    measures novelty over them; a feature name it does not know is refused."""
    fitted = DEVICE == "a100-sxm4-80gb"
    points = {d: [p[:5] for p in ps]
              for d, ps in device_points(FEATS[fitted], DEVICE[fitted]).items()}
    old = {"a": 0.2, "b": 0.3, "features": list(SCHEMA3_FEATURES), "points": points}
    scale = IntervalScale.from_dict(old)
    assert scale.features == SCHEMA3_FEATURES and scale.to_dict() == old
    assert np.allclose(scale.sigma(FEATS), 0.2 + 0.3 * novelty(FEATS, points, SCHEMA3_FEATURES))
    with pytest.raises(InputError, match="features"):
        IntervalScale.from_dict({**old, "features": [*SCHEMA3_FEATURES[:4], "log_hbm"]})
    mismatched = {**old, "features": list(NOVELTY_FEATURES)}  # five-number points, six names
    with pytest.raises(InputError, match="points"):
        IntervalScale.from_dict(mismatched)


def test_fit_scale_recovers_a_line_and_refuses_a_falling_one():
    rng = np.random.default_rng(0)
    nov = np.repeat([0.1, 0.5, 1.0, 1.5], 400)
    dev = np.repeat(list("abcd"), 400)
    r = rng.normal(size=len(nov)) * (0.2 + 0.4 * nov) / 1.645  # q90 |r| = 0.2 + 0.4 n
    a, b = fit_scale(r, nov, dev)
    assert abs(a - 0.2) < 0.05 and abs(b - 0.4) < 0.05
    a, b = fit_scale(r, nov[::-1].copy(), dev)  # spread falls with novelty: no slope
    assert b == 0.0 and a > 0
    a, b = fit_scale(r * 1e-6, nov, dev)
    assert a >= 0.05  # A_FLOOR
    a, b = fit_scale(r, nov + np.repeat([0, 1e-7, 2e-7, 3e-7], 400) - nov, dev)
    assert b == 0.0  # four devices at one novelty: no slope, however the noise falls
    two = np.isin(dev, ["a", "d"])
    assert fit_scale(r[two], nov[two], dev[two])[1] == 0.0  # two devices: no slope


@settings(max_examples=30, deadline=None)
@given(a=st.floats(0.05, 1.0), b=st.floats(0.0, 2.0))
def test_sigma_grows_with_novelty_and_round_trips(a, b):
    fitted = DEVICE == "h100-sxm"
    scale = IntervalScale(a, b, device_points(FEATS[fitted], DEVICE[fitted]))
    sigma = scale.sigma(FEATS)
    nov = novelty(FEATS, scale.points)
    assert np.allclose(sigma, a + b * nov)
    order = np.argsort(nov)
    assert (np.diff(sigma[order]) >= -1e-12).all()
    again = IntervalScale.from_dict(scale.to_dict())
    assert np.array_equal(again.sigma(FEATS), sigma)


def test_a_learned_step_interval_widens_on_a_gpu_unlike_the_fitted_ones():
    """step_interval prices tier `learned` with the shipped trees' novelty scale: the same
    kernels' band is wider on a GPU farther from every fitted one, and the tier is refused
    without a device rather than priced at a made-up distance."""
    import pytest

    from perfcast.kernels import step_interval

    ops = measurement_ops(load_store().query("device == 'h100-sxm' and family == 'gemm'")
                          .head(20))
    priced = ops.assign(total_s=1e-3)
    widths = {}
    for name in ("h100-sxm", "h100-pcie", "h20"):  # fitted; less bandwidth; a tenth the FLOP/s
        lo, hi = step_interval(priced, "learned", device=get_device(name))
        widths[name] = np.log(hi / lo)
    assert widths["h100-sxm"] < widths["h100-pcie"] < widths["h20"]
    with pytest.raises(ValueError, match="device"):
        step_interval(priced, "learned")
