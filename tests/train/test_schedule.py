"""Pipeline schedules: simulated graphs against the closed forms they must reproduce."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.train import build_schedule, simulate


def _makespan(kind, p, m, v=1, f=1.0, b=2.0, send=0.0):
    sc = build_schedule(kind, p, m, v)
    fwd = np.full((1, p, sc.v), f / sc.v)
    start, end = simulate(sc, fwd, fwd * b / f, np.array([send]))
    return sc, start[0], end[0]


@settings(max_examples=60, deadline=None)
@given(p=st.integers(1, 12), m=st.integers(1, 48), f=st.floats(0.1, 5.0),
       ratio=st.floats(1.0, 3.0), kind=st.sampled_from(["gpipe", "1f1b"]))
def test_uniform_stages_give_the_closed_form_bubble(p, m, f, ratio, kind):
    """GPipe and 1F1B with equal stages and free sends: (p - 1) / (m + p - 1) bubble
    (Huang et al. 2019; Narayanan et al. 2021), from the simulation, not the formula."""
    b = f * ratio
    _, _, end = _makespan(kind, p, m, f=f, b=b)
    makespan = end.max()
    assert makespan == pytest.approx((m + p - 1) * (f + b), rel=1e-9)
    assert (makespan - m * (f + b)) / makespan == pytest.approx((p - 1) / (m + p - 1), abs=1e-9)


@pytest.mark.parametrize("p,m,v", [(4, 32, 2), (4, 32, 4), (8, 16, 2), (8, 8, 3), (2, 6, 2)])
def test_interleaving_divides_the_bubble_by_v(p, m, v):
    """Interleaved 1F1B: bubble time (p - 1)(f + b) / v (Narayanan et al. 2021, section 2.2)."""
    _, _, plain = _makespan("1f1b", p, m)
    _, _, inter = _makespan("interleaved-1f1b", p, m, v)
    ideal = m * 3.0
    assert inter.max() - ideal == pytest.approx((plain.max() - ideal) / v, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(p=st.integers(2, 8), m=st.integers(1, 30), extra=st.integers(1, 30))
def test_more_micro_batches_shrink_the_bubble_share(p, m, extra):
    def share(mb):
        _, _, end = _makespan("1f1b", p, mb)
        return (end.max() - 3.0 * mb) / end.max()

    assert share(m + extra) < share(m)


@settings(max_examples=30, deadline=None)
@given(p=st.integers(2, 6), m=st.integers(1, 12), send=st.floats(0.0, 0.5),
       kind=st.sampled_from(["gpipe", "1f1b", "interleaved-1f1b"]))
def test_every_task_waits_for_its_inputs(p, m, send, kind):
    v = 2 if kind == "interleaved-1f1b" else 1
    m = m * p if v > 1 else m
    sc, start, end = _makespan(kind, p, m, v, send=send)
    has_dep = sc.dep >= 0
    arrive = end[sc.dep[has_dep]] + send * sc.cross[has_dep]
    assert np.all(start[has_dep] >= arrive - 1e-12)
    has_prev = sc.prev >= 0
    assert np.all(start[has_prev] >= end[sc.prev[has_prev]] - 1e-12)
    # sends never make the pipeline faster
    assert end.max() >= _makespan(kind, p, m, v)[2].max() - 1e-12


def test_stage_zero_holds_p_micro_batches_under_1f1b_and_all_under_gpipe():
    from perfcast.train._schedule import held

    p, m = 4, 10
    one_f = held(build_schedule("1f1b", p, m), np.ones((p, 1))).max(axis=1)
    assert list(one_f) == [min(p - s, m) for s in range(p)]
    gpipe = held(build_schedule("gpipe", p, m), np.ones((p, 1))).max(axis=1)
    assert list(gpipe) == [m] * p


def test_one_stage_is_forward_backward_per_micro_batch():
    sc, start, end = _makespan("gpipe", 1, 5, f=1.0, b=2.0)
    assert end.max() == pytest.approx(15.0)
    assert sc.backward[sc.order[0]].tolist() == [False, True] * 5
