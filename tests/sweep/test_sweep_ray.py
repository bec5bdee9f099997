import sys
import time

import pandas as pd
import pytest

from perfcast.errors import InputError
from perfcast.sweep import choose_backend, expand_grid, run_sweep
from perfcast.sweep._point import run_point

POINTS = expand_grid({"command": "collective", "gpu": "h100-sxm"},
                     {"op": ["allreduce", "allgather"], "num_gpus": [2, 8, 16],
                      "bytes": ["1MB", "1GB"]})


def _by_key(frame):
    return frame.sort_values("key").reset_index(drop=True)


def test_a_local_ray_instance_gives_the_local_results(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    local = run_sweep(POINTS, run_point, tmp_path / "local", workers=1)
    start = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        print(f"ray.init {time.perf_counter() - start:.1f} s")
        remote = run_sweep(POINTS, run_point, tmp_path / "ray", backend="ray")
        assert ray.is_initialized()  # a session the caller started is left running
    finally:
        ray.shutdown()
    assert (local.status == "ok").all() and len(local) == 12
    pd.testing.assert_frame_equal(_by_key(local), _by_key(remote))
    pd.testing.assert_frame_equal(local, remote)  # and in the points' order


def test_ray_missing_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(InputError, match=r"^ray: .*not installed.*perfcast\[ray\]"):
        run_sweep(POINTS, run_point, tmp_path, backend="ray")


def test_ray_address_in_the_environment_selects_ray():
    assert choose_backend(False, {"RAY_ADDRESS": "ray://head:10001"}) == "ray"
    assert choose_backend(True, {}) == "ray"
    assert choose_backend(False, {}) == "local"
