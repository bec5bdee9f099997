"""Workloads: arrivals, lengths, shipped traces, CSVs, clip, determinism and bad input."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.errors import InputError
from perfcast.serve._lengths import clip_total, load_trace
from perfcast.serve._workload import Workload, make_workload

FIXED = {"prompt_tokens": 128, "output_tokens": 16}


def _same(a: Workload, b: Workload) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f))
               for f in ("arrival_s", "prompt_tokens", "output_tokens"))


@pytest.mark.parametrize("kw", [
    {"qps": 3.0, **FIXED},
    {"arrival": "gamma", "qps": 3.0, "cv": 2.0, "lengths": "uniform",
     "prompt_tokens": (10, 900), "output_tokens": (1, 50)},
    {"qps": 1.0, "lengths": "zipf", "prompt_tokens": (1.2, 2048), "output_tokens": (0.9, 256)},
    {"qps": 1.0, "lengths": "trace", "trace": "arxiv"},
    {"arrival": "trace", "lengths": "trace", "trace": "splitwise-code", "qps": 4.0},
])
def test_same_seed_bit_identical_other_seed_differs(kw):
    a, b = make_workload(2000, seed=7, **kw), make_workload(2000, seed=7, **kw)
    assert _same(a, b)
    if kw.get("arrival") != "trace":
        assert not _same(a, make_workload(2000, seed=8, **kw))


def test_arrivals_do_not_depend_on_the_length_distribution():
    a = make_workload(500, qps=2.0, **FIXED, seed=3)
    b = make_workload(500, qps=2.0, lengths="trace", trace="arxiv", seed=3)
    assert np.array_equal(a.arrival_s, b.arrival_s)


def test_poisson_mean_rate_and_exponential_gaps():
    w = make_workload(50_000, qps=4.0, **FIXED, seed=1)
    gaps = np.diff(np.concatenate([[0.0], w.arrival_s]))
    # mean gap 0.25 s, std of the mean 0.25/sqrt(n) ~ 0.0011: 5 sigma
    assert abs(gaps.mean() - 0.25) < 5 * 0.25 / np.sqrt(len(gaps))
    assert abs(gaps.std() / gaps.mean() - 1.0) < 0.03  # exponential: cv = 1


@pytest.mark.parametrize("cv", [0.5, 2.0, 4.0])
def test_gamma_rate_and_burstiness(cv):
    w = make_workload(100_000, arrival="gamma", qps=2.0, cv=cv, **FIXED, seed=2)
    gaps = np.diff(np.concatenate([[0.0], w.arrival_s]))
    assert abs(gaps.mean() - 0.5) < 5 * 0.5 * cv / np.sqrt(len(gaps))
    assert abs(gaps.std() / gaps.mean() - cv) < 0.06 * cv


def test_closed_loop_sets_concurrency_and_zero_arrivals():
    w = make_workload(64, arrival="closed_loop", concurrency=8, prompt_tokens=8192,
                      output_tokens=1024, max_tokens=None)
    assert w.concurrency == 8 and len(w) == 64
    assert (w.arrival_s == 0).all() and (w.prompt_tokens == 8192).all()


@pytest.mark.parametrize("name", ["arxiv", "splitwise-conv", "splitwise-code"])
def test_trace_lengths_match_the_shipped_file(name):
    src = load_trace(name)
    w = make_workload(len(src), qps=1.0, lengths="trace", trace=name, max_tokens=None)
    # one full permutation of the file: the same multiset of lengths
    assert np.array_equal(np.sort(w.prompt_tokens), np.sort(src.prompt_tokens))
    assert np.array_equal(np.sort(w.output_tokens), np.sort(src.output_tokens))


def test_shipped_trace_statistics():
    arxiv = load_trace("arxiv")
    assert len(arxiv) == 28257 and arxiv.arrival_s is None
    assert round(arxiv.prompt_tokens.mean()) == 2588 and np.median(arxiv.output_tokens) == 167
    assert (arxiv.prompt_tokens + arxiv.output_tokens).max() == 4096
    conv, code = load_trace("splitwise-conv"), load_trace("splitwise-code")
    assert (len(conv), len(code)) == (19366, 8819)
    assert np.median(conv.prompt_tokens) == 1020 and np.median(code.output_tokens) == 13
    assert conv.arrival_s[-1] == pytest.approx(3501.721937)


def test_trace_replay_in_order_and_time_scaled():
    src = load_trace("splitwise-conv")
    w = make_workload(1000, arrival="trace", lengths="trace", trace="splitwise-conv",
                      max_tokens=None)
    assert np.array_equal(w.arrival_s, src.arrival_s[:1000])
    assert np.array_equal(w.prompt_tokens, src.prompt_tokens[:1000])
    fast = make_workload(1000, arrival="trace", lengths="trace", trace="splitwise-conv",
                         qps=20.0, max_tokens=None)
    assert 999 / fast.arrival_s[-1] == pytest.approx(20.0)
    assert np.allclose(fast.arrival_s / fast.arrival_s[-1], w.arrival_s / w.arrival_s[-1])


def test_trace_replay_wraps_past_the_end():
    src = load_trace("splitwise-code")
    w = make_workload(len(src) + 50, arrival="trace", lengths="trace", trace="splitwise-code",
                      max_tokens=None)
    assert (np.diff(w.arrival_s) >= 0).all() and w.arrival_s[len(src)] > src.arrival_s[-1]
    assert np.array_equal(w.prompt_tokens[len(src):], src.prompt_tokens[:50])


def test_max_tokens_clip():
    for name in ("splitwise-conv", "splitwise-code"):
        w = make_workload(5000, qps=1.0, lengths="trace", trace=name, max_tokens=4096)
        assert (w.prompt_tokens + w.output_tokens).max() <= 4096
        assert w.prompt_tokens.min() >= 1 and w.output_tokens.min() >= 1
    p, o = clip_total(np.array([5000, 100, 4095, 9000]), np.array([1000, 50, 10, 1]), 4096)
    assert ((p + o)[[0, 2, 3]] <= 4096).all() and ((p + o)[[0, 2, 3]] >= 4094).all()
    assert (p[1], o[1]) == (100, 50) and o[3] >= 1 and p[0] > o[0]  # proportional cut
    with pytest.raises(InputError, match="max_tokens"):
        make_workload(4, qps=1.0, prompt_tokens=4000, output_tokens=200)


def test_user_csv(tmp_path):
    f = tmp_path / "mine.csv"
    pd.DataFrame({"prompt_tokens": [10, 20, 30], "output_tokens": [1, 2, 3],
                  "arrival_s": [0.0, 0.5, 2.0], "note": ["a", "b", "c"]}).to_csv(f, index=False)
    w = make_workload(3, arrival="trace", lengths="csv", csv=f)
    assert list(w.arrival_s) == [0.0, 0.5, 2.0] and list(w.prompt_tokens) == [10, 20, 30]
    w = make_workload(6, qps=2.0, lengths="csv", csv=f)
    assert sorted(w.output_tokens) == [1, 1, 2, 2, 3, 3]


@pytest.mark.parametrize("table,field", [
    ({"prompt": [1], "output_tokens": [1]}, "csv"),
    ({"prompt_tokens": [1, 0], "output_tokens": [1, 1]}, "prompt_tokens"),
    ({"prompt_tokens": [1, 2], "output_tokens": [1.5, 1]}, "output_tokens"),
    ({"prompt_tokens": [1, 2], "output_tokens": ["x", 1]}, "output_tokens"),
    ({"prompt_tokens": [1, 2], "output_tokens": [1, 1], "arrival_s": [1.0, 0.5]}, "arrival_s"),
])
def test_bad_csv_names_the_column(tmp_path, table, field):
    f = tmp_path / "bad.csv"
    pd.DataFrame(table).to_csv(f, index=False)
    with pytest.raises(InputError) as e:
        make_workload(2, arrival="trace", lengths="csv", csv=f)
    assert e.value.field == field
    if table.get("prompt") is not None:
        assert "prompt_tokens" in str(e.value) and "did you mean prompt" in str(e.value)


@pytest.mark.parametrize("kw,field", [
    ({"arrival": "possion", "qps": 1.0}, "arrival"),
    ({"lengths": "zipff", "qps": 1.0}, "lengths"),
    ({"qps": None}, "qps"),
    ({"qps": -1.0}, "qps"),
    ({"arrival": "gamma", "qps": 1.0}, "cv"),
    ({"arrival": "gamma", "qps": 1.0, "cv": 0.0}, "cv"),
    ({"arrival": "closed_loop"}, "concurrency"),
    ({"qps": 1.0, "concurrency": 4}, "concurrency"),
    ({"arrival": "closed_loop", "concurrency": 0}, "concurrency"),
    ({"arrival": "trace", "trace": "arxiv"}, "arrival"),
    ({"arrival": "trace"}, "trace"),
    ({"qps": 1.0, "lengths": "trace", "trace": "splitwise"}, "trace"),
    ({"qps": 1.0, "lengths": "csv"}, "csv"),
    ({"qps": 1.0, "lengths": "csv", "csv": "/no/such.csv"}, "csv"),
    ({"qps": 1.0, "prompt_tokens": 0}, "prompt_tokens"),
    ({"qps": 1.0, "output_tokens": None}, "output_tokens"),
    ({"qps": 1.0, "lengths": "uniform", "prompt_tokens": (9, 3)}, "prompt_tokens"),
    ({"qps": 1.0, "lengths": "uniform", "prompt_tokens": 5}, "prompt_tokens"),
    ({"qps": 1.0, "lengths": "zipf", "prompt_tokens": (0, 100)}, "prompt_tokens"),
    ({"qps": 1.0, "seed": -1}, "seed"),
])
def test_bad_inputs_name_the_field(kw, field):
    args = {**FIXED, **kw}
    for k in [k for k, v in kw.items() if v is None]:
        args[k] = None
    with pytest.raises(InputError) as e:
        make_workload(10, **args)
    assert e.value.field == field


def test_unknown_names_suggest_close_matches():
    with pytest.raises(InputError, match="did you mean poisson"):
        make_workload(1, arrival="possion", qps=1.0, **FIXED)
    with pytest.raises(InputError, match="splitwise-co"):
        make_workload(1, qps=1.0, lengths="trace", trace="splitwise_conv")
    with pytest.raises(InputError) as e:
        make_workload(0, qps=1.0, **FIXED)
    assert e.value.field == "num_requests"


@pytest.mark.parametrize("kw,field", [
    ({"arrival_s": [1.0, 0.5]}, "arrival_s"),
    ({"arrival_s": [-1.0, 0.5]}, "arrival_s"),
    ({"prompt_tokens": [0, 3]}, "prompt_tokens"),
    ({"output_tokens": [1.5, 3]}, "output_tokens"),
    ({"output_tokens": [1]}, "arrival_s"),
    ({"concurrency": 0}, "concurrency"),
])
def test_workload_validation(kw, field):
    args = {"arrival_s": [0.0, 1.0], "prompt_tokens": [1, 2], "output_tokens": [3, 4], **kw}
    with pytest.raises(InputError) as e:
        Workload(**{k: v if k == "concurrency" else np.array(v) for k, v in args.items()})
    assert e.value.field == field


def test_workload_is_frozen_and_typed():
    w = Workload(np.array([0, 1]), np.array([1, 2]), np.array([3.0, 4.0]))
    assert w.arrival_s.dtype == np.float64 and w.output_tokens.dtype == np.int64
    assert len(w) == 2
    with pytest.raises(ValueError):
        w.prompt_tokens[0] = 5


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 300), seed=st.integers(0, 2**32),
       arrival=st.sampled_from(["poisson", "gamma", "trace"]),
       lengths=st.sampled_from(["fixed", "uniform", "zipf", "trace"]),
       qps=st.floats(0.01, 1000.0), cv=st.floats(0.1, 8.0),
       max_tokens=st.sampled_from([None, 2, 64, 4096]))
def test_property_sorted_arrivals_and_positive_lengths(n, seed, arrival, lengths, qps, cv,
                                                       max_tokens):
    sides = {"fixed": (1, 1), "uniform": ((1, 5000), (1, 300)),
             "zipf": ((1.1, 4000), (0.7, 900)), "trace": (None, None)}[lengths]
    w = make_workload(n, arrival=arrival, qps=qps, cv=cv if arrival == "gamma" else None,
                      lengths=lengths, prompt_tokens=sides[0], output_tokens=sides[1],
                      trace="splitwise-conv", max_tokens=max_tokens, seed=seed)
    assert len(w) == n and (np.diff(w.arrival_s) >= 0).all() and w.arrival_s[0] >= 0
    assert w.prompt_tokens.min() >= 1 and w.output_tokens.min() >= 1
    if max_tokens is not None:
        assert (w.prompt_tokens + w.output_tokens).max() <= max(max_tokens, 2)
