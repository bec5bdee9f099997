"""Data files read through their compact copy give what the JSON gives, and the copy is
never trusted for other bytes (perfcast.kernels._json_cache)."""

import json
from importlib import resources

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfcast.kernels import PhysicsModel
from perfcast.kernels._calibration import KERNEL_SOURCES, Calibration
from perfcast.kernels._json_cache import cache_dir, read_json_data
from perfcast.ops import Batch, step_ops
from perfcast.specs import get_device, get_model


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("PERFCAST_CACHE_DIR", str(folder))
    return folder


def _plain(node):
    """The document with numpy matrices as nested lists, for comparing with json.loads."""
    if isinstance(node, dict):
        return {k: _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if isinstance(node, np.ndarray):
        return node.tolist()
    return node


def _write(path, doc):
    path.write_text(json.dumps(doc))
    return path


_floats = st.floats(allow_nan=False, allow_infinity=False)
_leaves = st.one_of(st.none(), st.booleans(), st.integers(-10, 10), _floats, st.text(max_size=4))
_docs = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(st.text(max_size=5), inner, max_size=5),
        st.lists(st.lists(_floats, min_size=2, max_size=2), min_size=1, max_size=6),
        st.dictionaries(st.text(max_size=6), _floats, min_size=4, max_size=40)),
    max_leaves=40)


@given(_docs)
def test_any_document_reads_back_as_its_json(doc):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        mp.setenv("PERFCAST_CACHE_DIR", str(Path(tmp) / "c"))
        path = _write(Path(tmp) / "doc.json", doc)
        first, second = read_json_data(path), read_json_data(path)
        want = json.loads(path.read_text())
        assert _plain(first) == want
        assert _plain(second) == want  # from the copy, when one could be written


def test_shipped_calibrations_read_from_the_copy_equal_the_json(cache):
    for source in KERNEL_SOURCES.values():
        path = resources.files("perfcast.kernels") / "data" / source.calibration_file
        parsed = Calibration.from_json(path.read_text())
        assert Calibration.from_data(read_json_data(path)).to_json() == parsed.to_json()
        assert len(list(cache.glob("*.npz"))) >= 1
        assert Calibration.from_data(read_json_data(path)).to_json() == parsed.to_json()


def test_kernel_times_are_bit_identical_from_the_copy_and_the_json(cache):
    path = resources.files("perfcast.kernels") / "data" / "calibration.json"
    ops = step_ops(get_model("llama-2-7b"), Batch(prefill_tokens=[512], prefill_context=[512],
                                                 decode_context=[300] * 8))
    device = get_device("h100-sxm")
    fresh = PhysicsModel(Calibration.from_json(path.read_text())).kernel_times(ops, device)
    read_json_data(path)  # writes the copy
    copied = PhysicsModel(Calibration.from_data(read_json_data(path))).kernel_times(ops, device)
    np.testing.assert_array_equal(fresh, copied)


def test_the_copy_is_keyed_by_content_and_replaced_when_the_file_changes(cache, tmp_path):
    path = _write(tmp_path / "cal.json", {"cells": {f"k{i}": i + 0.5 for i in range(8)}})
    read_json_data(path)
    (first,) = cache.glob("cal-*.npz")
    _write(path, {"cells": {f"k{i}": i + 1.5 for i in range(8)}})
    assert read_json_data(path)["cells"]["k0"] == 1.5
    (second,) = cache.glob("cal-*.npz")  # the old file's copy is pruned
    assert second != first
    assert read_json_data(path)["cells"]["k0"] == 1.5


def test_a_damaged_copy_is_ignored_and_rewritten(cache, tmp_path):
    path = _write(tmp_path / "cal.json", {"m": [[1.0, 2.0], [3.0, 4.0]]})
    read_json_data(path)
    (copy,) = cache.glob("cal-*.npz")
    copy.write_bytes(b"not an npz")
    assert _plain(read_json_data(path)) == {"m": [[1.0, 2.0], [3.0, 4.0]]}
    assert np.load(copy, allow_pickle=False)["floats"].tolist() == [1.0, 2.0, 3.0, 4.0]


def test_no_copy_when_turned_off_or_unwritable(tmp_path, monkeypatch):
    path = _write(tmp_path / "cal.json", {"m": [[1.0, 2.0]]})
    monkeypatch.setenv("PERFCAST_CACHE_DIR", "")
    assert cache_dir() is None
    assert _plain(read_json_data(path)) == {"m": [[1.0, 2.0]]}
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("PERFCAST_CACHE_DIR", str(blocker / "sub"))  # cannot be created
    assert _plain(read_json_data(path)) == {"m": [[1.0, 2.0]]}
    assert list(tmp_path.rglob("*.npz")) == []


def test_default_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("PERFCAST_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "perfcast"


def test_ints_and_marker_like_keys_stay_json(cache, tmp_path):
    doc = {"ints": [[1, 2], [3, 4]], "\x00matrix": 1, "mixed": [[1.0, 2]]}
    path = _write(tmp_path / "odd.json", doc)
    assert read_json_data(path) == doc
    assert read_json_data(path) == doc
    assert list(cache.glob("*.npz")) == []  # a key that would shadow a marker: no copy
