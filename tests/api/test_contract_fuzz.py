"""Issue 16: hypothesis fuzzing of the request models. Any flat options (right and wrong
names, types, ranges, text, negative and huge numbers) either build a request or raise
InputError, never another exception; and `resolve` of a request that builds either succeeds
or raises InputError."""

import contextlib
import math
import os
import typing

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import perfcast.api as api
from perfcast.errors import InputError

VALUES = st.one_of(
    st.sampled_from([0, 1, 2, 8, -1, -8, 10**7 + 1, 10**30, 0.5, -0.5, 1e30, math.nan,
                     math.inf, -math.inf, True, False, None, "", "abc", "1,2", "0", "-3",
                     "2x4", "64MiB", "500ms", "1e400", "h100-sxm", "llama-2-7b", "trace",
                     [], ["llama-2-7b"], {"a": 1}]),
    st.integers(min_value=-10**6, max_value=10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
# A few seconds in all by default; FUZZ_N=2000 searches longer (and randomly).
EXAMPLES = int(os.environ.get("FUZZ_N", 100))
WRONG_NAMES = ["tpp", "model_name", "qps_", "--tp", "Gpu", "x"]
# A valid question per command that the drawn options change, so draws reach `resolve`.
BASE = {
    "infer": {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb"},
    "step": {"model": "gpt2"},
    "train": {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb", "num_gpus": 8, "zero": 3},
    "serve": {"num_requests": 8, "qps": 2.0},
    "capacity": {"model": "llama-2-7b", "gpu": "h100-sxm", "tp": "1", "num_requests": 8},
    "collective": {"op": "allreduce", "num_gpus": 8, "bytes": "64MB", "gpu": "h100-sxm"},
    "accel": {"model": "resnet50", "layer": "conv1"},
    "diffusion": {"gpu": "a100-sxm4-80gb", "steps": 2},
    "rag": {"gpu": "h100-sxm"},
    "measure": {"out": "m.csv"},
    "calibrate": {"measurements": "m.csv", "device": "h100-sxm", "out": "c.json"},
}


TYPED = {int: st.integers(min_value=-2, max_value=64),
         float: st.floats(min_value=-1.0, max_value=64.0),
         bool: st.booleans()}


def _value(annotation) -> st.SearchStrategy:
    """Mostly a value of the option's own type (so draws get past the type check), else any."""
    kinds = typing.get_args(annotation) or (annotation,)
    typed = [TYPED[k] for k in kinds if k in TYPED]
    return st.one_of(*typed, *typed, VALUES) if typed else VALUES


def _options(command: str) -> st.SearchStrategy[dict]:
    types = api.command_for(command).request.option_types()
    right = st.sampled_from(sorted(types)).flatmap(
        lambda n: st.tuples(st.just(n), _value(types[n])))
    wrong = st.tuples(st.sampled_from(WRONG_NAMES), VALUES)
    return st.lists(st.one_of(right, right, right, wrong), max_size=3).map(dict)


def _check(command: str, options: dict) -> None:
    try:
        request = api.request_from_options(command, {**BASE.get(command, {}), **options})
    except InputError:
        return
    with contextlib.suppress(InputError):
        api.resolve(request)


@pytest.mark.parametrize("command", sorted(api.COMMANDS))
def test_any_options_build_a_request_or_raise_input_error(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative output paths a draw names land in a scratch dir

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=not os.environ.get("FUZZ_N"),
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(options=_options(command))
    def check(options):
        _check(command, options)

    check()
