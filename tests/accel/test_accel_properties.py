"""Invariants of the cost model and the mapper, for random problems and mappings."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.accel import (
    DATAFLOWS,
    Mapping,
    conv_problem,
    default_mapping,
    evaluate_mapping,
    get_arch,
    search_mapping,
)
from perfcast.accel._mapper import _build, _fill, _perms, _spatial_split
from perfcast.errors import InputError

ARCH = get_arch("eyeriss-like")
_small = st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16])


@st.composite
def problems(draw):
    return conv_problem("p", n=draw(st.sampled_from([1, 2])), c=draw(_small), m=draw(_small),
                        r=draw(st.sampled_from([1, 3])), p=draw(_small),
                        stride=draw(st.sampled_from([1, 2])))


@st.composite
def mappings(draw, problem):
    import random

    rng = random.Random(draw(st.integers(0, 10_000)))
    dataflow = draw(st.sampled_from(sorted(DATAFLOWS)))
    perms = _perms(ARCH, dataflow, rng)
    spatial = _spatial_split(ARCH, problem, dataflow, rng)
    return _build(ARCH, _fill(ARCH, problem, spatial, perms, rng), spatial, perms)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_macs_and_energy_floor_for_any_mapping(data):
    problem = data.draw(problems())
    mapping = data.draw(mappings(problem))
    res = evaluate_mapping(ARCH, problem, Mapping.model_validate(mapping.model_dump()))
    assert res.macs == math.prod(problem.dims.values())
    assert res.energy_j >= res.macs * ARCH.mac_energy_pj * 1e-12
    assert res.cycles * ARCH.num_pes >= res.macs
    assert 0 < res.utilization <= 1
    assert all(v >= 0 for lvl in res.accesses.values() for t in lvl.values() for v in t.values())


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_more_spatial_parallelism_never_more_cycles_without_bandwidth_limits(data):
    arch = ARCH.model_copy(update={"levels": tuple(
        lvl.model_copy(update={"bandwidth_words_per_cycle": None,
                               "read_bandwidth_words_per_cycle": None,
                               "write_bandwidth_words_per_cycle": None})
        for lvl in ARCH.levels)})
    problem = data.draw(problems())
    serial = default_mapping(arch, problem, "row-stationary")
    levels = [lm.model_copy(update={"spatial": {}}) for lm in serial.levels]
    # the same nest with all spatial factors moved to DRAM's temporal loops
    moved = dict(levels[0].temporal)
    for lm in serial.levels:
        for dim, v in lm.spatial.items():
            moved[dim] = moved.get(dim, 1) * v
    levels[0] = levels[0].model_copy(update={"temporal": moved})
    flat = Mapping(levels=tuple(levels))
    assert evaluate_mapping(arch, problem, serial).cycles <= \
        evaluate_mapping(arch, problem, flat).cycles


@pytest.mark.parametrize("objective", ["energy", "delay", "edp"])
@pytest.mark.parametrize("dataflow", sorted(DATAFLOWS))
def test_mapper_never_worse_than_the_preset_default(objective, dataflow):
    problem = conv_problem("c", c=32, m=64, r=3, p=14)
    base = evaluate_mapping(ARCH, problem, default_mapping(ARCH, problem, dataflow))
    best = search_mapping(ARCH, problem, objective, dataflow=dataflow, seed=1, max_samples=300)
    key = {"energy": lambda r: r.energy_j, "delay": lambda r: r.cycles,
           "edp": lambda r: r.energy_j * r.cycles}[objective]
    assert key(best) <= key(base)
    best.mapping.check(ARCH, problem)  # a valid mapping


def test_search_is_deterministic_for_a_seed():
    problem = conv_problem("c", c=64, m=64, r=3, p=28)
    a = search_mapping(ARCH, problem, "edp", seed=7, max_samples=400)
    b = search_mapping(ARCH, problem, "edp", seed=7, max_samples=400)
    assert a.as_dict() == b.as_dict()


def test_bad_objective_and_dataflow_suggest_close_matches():
    problem = conv_problem("c", c=4, m=4, r=1, p=4)
    with pytest.raises(InputError, match="energy"):
        search_mapping(ARCH, problem, "enrgy")
    with pytest.raises(InputError, match="row-stationary"):
        search_mapping(ARCH, problem, dataflow="row-stationery")


def test_mapping_that_breaks_the_problem_or_capacity_is_rejected():
    problem = conv_problem("c", c=4, m=4, r=1, p=4)
    good = default_mapping(ARCH, problem)
    wrong = good.model_copy(update={"levels": (
        good.levels[0].model_copy(update={"temporal": {"C": 3}}), *good.levels[1:])})
    with pytest.raises(InputError, match="mapping.C"):
        evaluate_mapping(ARCH, problem, wrong)
    big = conv_problem("b", c=64, m=64, r=1, p=4)
    spad = Mapping(levels=(*[type(lm)() for lm in good.levels[:4]],
                           type(good.levels[0])(temporal={"C": 64, "M": 64, "P": 4, "Q": 4})))
    with pytest.raises(InputError, match="capacity"):
        evaluate_mapping(ARCH, big, spad)


def test_a_layer_too_big_for_a_bounded_single_level_is_refused():
    arch = get_arch("tutorial-1level")  # 64 words, nothing above it
    assert search_mapping(arch, conv_problem("s", c=1, m=2, r=3, p=2), "energy").fits
    with pytest.raises(InputError, match="fits no mapping"):
        search_mapping(arch, conv_problem("b", c=16, m=16, r=3, p=8), "energy")
