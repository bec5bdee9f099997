"""fit_family's Jacobian: one residual evaluation per group of parameters that move disjoint
rows, yet the solver sees scipy's dense '2-point' Jacobian bit for bit, so fits are what
they were (same parameters, same floats)."""

import numpy as np
import pytest
from scipy.optimize._numdiff import approx_derivative

from perfcast.kernels import _fit
from perfcast.kernels._calibration import _prepare_rows, kernel_rows
from perfcast.measure import load_store, sample_per_group


@pytest.fixture(scope="module")
def families():
    rows = kernel_rows(load_store(source="vllm"))
    rows = sample_per_group(rows[rows["family"].isin(["attn_decode", "gemm"])], 25, 0)
    return {f: _prepare_rows(part, None) for f, part in rows.groupby("family")}


def _fit_with(monkeypatch, dense: bool, family, prepared, **kwargs):
    prep, lat, grp, _, _ = prepared
    if dense:
        monkeypatch.setattr(_fit, "_grouped_jacobian", lambda residual, *_: (residual, "2-point"))
    params = _fit.fit_family(family, prep, lat, grp, **kwargs)
    monkeypatch.undo()
    return params


@pytest.mark.parametrize("family", ["attn_decode", "gemm"])
def test_fits_are_the_dense_jacobians_fits(monkeypatch, families, family):
    shared = _fit_with(monkeypatch, False, family, families[family])
    assert shared == _fit_with(monkeypatch, True, family, families[family])
    anchored = {"init": shared, "prior_weight": 0.3}  # a device's own refit (target tier)
    assert (_fit_with(monkeypatch, False, family, families[family], **anchored)
            == _fit_with(monkeypatch, True, family, families[family], **anchored))


def test_jacobian_is_scipys_dense_one_bit_for_bit(monkeypatch, families):
    """Same numbers (zeros' signs included) in the same memory layout, at random points."""
    seen = {}

    def keep(residual, support, rows, lower, upper):
        seen.update(residual=residual, support=support, rows=rows, lower=lower, upper=upper)
        return residual, "2-point"

    monkeypatch.setattr(_fit, "_grouped_jacobian", keep)
    prep, lat, grp, _, _ = families["attn_decode"]
    _fit.fit_family("attn_decode", prep, lat, grp)
    monkeypatch.undo()
    lower, upper = seen["lower"], seen["upper"]
    assert seen["rows"] == len(lat)
    fun, jac = _fit._grouped_jacobian(seen["residual"], seen["support"], seen["rows"], lower,
                                      upper)
    assert len(_fit._groups(seen["support"], len(lat))) < len(lower)  # fewer evaluations
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = np.clip(rng.normal(0.0, 1.5, len(lower)), lower + 1e-9, upper - 1e-9)
        f0 = fun(x)
        want = approx_derivative(seen["residual"], x, method="2-point", f0=f0,
                                 bounds=(lower, upper))
        got = jac(x)
        assert got.tobytes() == want.tobytes() and got.flags.f_contiguous == want.flags.f_contiguous
