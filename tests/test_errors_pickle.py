"""Input errors cross process boundaries intact (sweep, suite and capacity workers)."""

import pickle

from hypothesis import given
from hypothesis import strategies as st

from perfcast.errors import AmbiguousName, InputError


@given(st.text(min_size=1, max_size=20), st.text(max_size=40),
       st.none() | st.lists(st.text(min_size=1, max_size=8), max_size=4))
def test_input_error_round_trips(field, problem, allowed):
    error = InputError(field, problem, allowed)
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is InputError and str(back) == str(error)
    assert (back.field, back.problem, back.allowed) == (error.field, error.problem,
                                                       error.allowed)


def test_ambiguous_name_round_trips():
    back = pickle.loads(pickle.dumps(AmbiguousName("gpu", "a100", ["a100-sxm4-80gb", "x"])))
    assert isinstance(back, AmbiguousName) and back.candidates == ("a100-sxm4-80gb", "x")
