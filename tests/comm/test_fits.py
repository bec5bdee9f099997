"""LinkFit's efficiency curve and the fitting functions behind comm/data/nccl_fits.json."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfcast.comm import LinkFit, fit_link, fit_p2p, shipped_link_fits
from perfcast.errors import InputError

CURVE = LinkFit(kind="nvswitch", base_s=6e-6, alpha_s=9e-7, group_sizes=(2.0, 4.0, 8.0),
                ceiling=(0.7, 0.8, 0.9), half_bytes=5e6, exponent=0.45, max_bytes=1e9)


@given(x=st.floats(1.0, 1e12), factor=st.floats(1.0, 1e3), g=st.floats(2, 16384))
def test_efficiency_grows_with_traffic_up_to_its_ceiling(x, factor, g):
    lo, hi = CURVE.efficiency(np.array([x, x * factor]), np.array([g, g]))
    assert 0 < lo <= hi <= CURVE.ceiling_for(np.array([g]))[0] <= 0.9
    if x >= CURVE.max_bytes:  # never extrapolated upward past the largest measured traffic
        assert lo == hi


def test_ceiling_interpolates_in_log_group_size_and_round_trips_json():
    assert CURVE.ceiling_for(np.array([2.0, np.sqrt(8.0), 8.0, 64.0])) == pytest.approx(
        [0.7, 0.75, 0.9, 0.9])
    assert LinkFit.from_json(CURVE.to_json()) == CURVE
    for fit in shipped_link_fits().values():
        assert LinkFit.from_json(fit.to_json()) == fit
        assert min(fit.ceiling) > 0 and max(fit.ceiling) <= 1 and 0.1 <= fit.exponent <= 1


def test_fit_link_recovers_a_known_curve():
    n, m = np.meshgrid([2.0, 4.0, 8.0], 2.0 ** np.arange(9, 30))
    n, m = n.ravel(), m.ravel()
    traffic = 2 * (n - 1) / n * m
    t = (CURVE.base_s + 2 * (n - 1) * CURVE.alpha_s
         + traffic / (450e9 * CURVE.efficiency(traffic, n)))
    fit = fit_link("nvswitch", n, m, t, 450e9)
    pred = (fit.base_s + 2 * (n - 1) * fit.alpha_s
            + traffic / (450e9 * fit.efficiency(traffic, n)))
    assert np.max(np.abs(pred / t - 1)) < 0.01
    assert fit.ceiling == pytest.approx(CURVE.ceiling, rel=0.02)
    with pytest.raises(InputError, match="measurements"):
        fit_link("nvswitch", n[:3], m[:3], t[:3], 450e9)


def test_fit_p2p_recovers_a_line():
    m = 2.0 ** np.arange(11, 27)
    latency, bandwidth = fit_p2p(m, 8e-6 + m / 300e9)
    assert latency == pytest.approx(8e-6) and bandwidth == pytest.approx(300e9)
    with pytest.raises(InputError):
        fit_p2p(m, 1e-3 - m / 1e12)
