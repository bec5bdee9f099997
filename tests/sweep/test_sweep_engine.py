import math

import pandas as pd
import pyarrow.parquet as pq
import pytest

from perfcast.errors import InputError
from perfcast.sweep import PARTS_DIR, RESULTS_FILE, expand_grid, point_key, run_sweep

CALLS: list[dict] = []


def payload(point):
    """A test double for a command: numbers, a string, a nested list; x == 3 is bad input."""
    CALLS.append(point)
    if point["x"] == 3:
        raise InputError("x", "3 is not allowed", "anything else")
    return {"y": point["x"] * point["scale"], "half": point["x"] / 2,
            "inner": {"name": f"p{point['x']}", "hist": [point["x"], 1]}}


def interrupted_after(k):
    """A point function that stops the sweep (like Ctrl-C) at its (k+1)-th call."""
    def fn(point):
        if len(CALLS) >= k:
            raise KeyboardInterrupt
        return payload(point)
    return fn


POINTS = expand_grid({"scale": 10}, {"x": [0, 1, 2, 3, 4, 5, 6, 7]})


@pytest.fixture(autouse=True)
def _reset_calls():
    CALLS.clear()


def test_rows_hold_inputs_flattened_outputs_and_errors(tmp_path):
    frame = run_sweep(POINTS, payload, tmp_path, workers=1)
    assert list(frame.columns[:3]) == ["key", "status", "error"]
    assert list(frame.key) == [point_key(p) for p in POINTS]  # the points' order
    assert list(frame["in.x"]) == list(range(8))
    ok = frame[frame.status == "ok"]
    assert list(ok["out.y"]) == [10 * x for x in ok["in.x"]]
    assert list(ok["out.inner.name"]) == [f"p{x}" for x in ok["in.x"]]
    assert ok["out.inner.hist"].iloc[1] == "[1, 1]"  # lists as JSON text
    bad = frame[frame.status == "error"]
    assert list(bad["in.x"]) == [3]
    assert bad.error.iloc[0].startswith("x: 3 is not allowed")
    assert math.isnan(bad["out.y"].iloc[0])
    assert frame.attrs["computed"] == 8 and frame.attrs["reused"] == 0
    assert frame.equals(pd.read_parquet(tmp_path / RESULTS_FILE))


def test_rerun_recomputes_nothing_and_returns_the_same(tmp_path):
    first = run_sweep(POINTS, payload, tmp_path, workers=1)
    CALLS.clear()
    again = run_sweep(POINTS, payload, tmp_path, workers=1)
    assert CALLS == [] and again.attrs["reused"] == 8
    pd.testing.assert_frame_equal(first, again)


def test_a_grown_grid_computes_only_the_new_points(tmp_path):
    run_sweep(POINTS[:5], payload, tmp_path, workers=1, chunk_points=2)
    CALLS.clear()
    full = run_sweep(POINTS, payload, tmp_path, workers=1)
    assert [c["x"] for c in CALLS] == [5, 6, 7]
    clean = run_sweep(POINTS, payload, tmp_path / "clean", workers=1)
    pd.testing.assert_frame_equal(full, clean)
    assert len(full) == 8  # results hold this sweep's points only


def test_an_interrupted_sweep_keeps_its_finished_points_and_resumes(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        run_sweep(POINTS, interrupted_after(5), tmp_path, workers=1,
                  chunk_points=2)
    parts = sorted((tmp_path / PARTS_DIR).iterdir())
    assert all(p.name.startswith("part-") for p in parts)  # no temporary file left
    saved = pd.concat([pq.read_table(p).to_pandas() for p in parts])
    assert sorted(saved["in.x"]) == [0, 1, 2, 3, 4]  # every finished point, none lost
    assert not (tmp_path / RESULTS_FILE).exists()
    CALLS.clear()
    resumed = run_sweep(POINTS, payload, tmp_path, workers=1)
    assert [c["x"] for c in CALLS] == [5, 6, 7]
    assert resumed.attrs == {**resumed.attrs, "computed": 3, "reused": 5}
    clean = run_sweep(POINTS, payload, tmp_path / "clean", workers=1)
    pd.testing.assert_frame_equal(resumed, clean)
    assert (tmp_path / RESULTS_FILE).read_bytes() == (
        tmp_path / "clean" / RESULTS_FILE).read_bytes()  # bit-identical files


def test_process_pool_gives_the_in_process_results(tmp_path):
    serial = run_sweep(POINTS, payload, tmp_path / "serial", workers=1)
    pooled = run_sweep(POINTS, payload, tmp_path / "pool", workers=2,
                       chunk_points=3)
    pd.testing.assert_frame_equal(serial, pooled)


def test_duplicate_points_run_once(tmp_path):
    frame = run_sweep([*POINTS[:2], POINTS[0]], payload, tmp_path, workers=1)
    assert len(frame) == 2 and len(CALLS) == 2


def test_mixed_kinds_in_a_column_become_text(tmp_path):
    frame = run_sweep([{"v": 1}, {"v": "a"}], lambda p: {"v": p["v"]}, tmp_path, workers=1)
    assert list(frame["out.v"]) == ["1", "a"]


def test_bad_backend_and_workers_name_the_field(tmp_path):
    with pytest.raises(InputError, match="^backend"):
        run_sweep(POINTS, payload, tmp_path, backend="dask")
    with pytest.raises(InputError, match="^workers"):
        run_sweep(POINTS, payload, tmp_path, workers=0)


def test_a_write_killed_midway_leaves_no_part_and_its_points_rerun(tmp_path, monkeypatch):
    import perfcast.sweep._store as store

    real_write = store.pq.write_table

    def dying_write(table, handle):
        handle.write(b"PAR1 half a file")  # the process dies here, mid-write
        raise KeyboardInterrupt

    monkeypatch.setattr(store.pq, "write_table", dying_write)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(POINTS[:2], payload, tmp_path, workers=1, chunk_points=2)
    parts = tmp_path / PARTS_DIR
    assert not list(parts.glob("part-*"))  # only the temporary file, never a final one
    assert len(list(parts.iterdir())) == 1
    monkeypatch.setattr(store.pq, "write_table", real_write)
    CALLS.clear()
    frame = run_sweep(POINTS[:2], payload, tmp_path, workers=1)
    assert len(CALLS) == 2 and list(frame["out.y"]) == [0, 10]
    assert all(p.name.startswith("part-") for p in parts.iterdir())  # the leftover is gone
