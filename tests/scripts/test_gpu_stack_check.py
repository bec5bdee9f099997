"""scripts/gpu_stack_check.py runs with --tiny on the CPU, and its kernel_grid rows are
measurement-store rows that perfcast can price (FLOPs and bytes as the store counts them)."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfcast.kernels import default_time_model, measurement_ops
from perfcast.measure import STORE_COLUMNS, TIMING_METHODS, check_measurements
from perfcast.ops import attended_keys
from perfcast.specs import get_device

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_stack_check.py"
# columns the integrator adds when it files the rows (where they were measured)
PROVENANCE = {"source": "local", "source_file": "stack_check.json", "split": "",
              "device": "h100-sxm"}
ELEM = {"bf16": 2, "fp8": 1}


def _run(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--out", str(out), *args],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("stack") / "check.json"
    done = _run(out, "--parts", "kernel_grid,hf_generate")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(out.read_text()), done.stdout


@pytest.fixture(scope="module")
def grid(result):
    rows = [r for r in result[0]["rows"] if r["what"] == "kernel_grid"]
    return pd.DataFrame(rows)


def test_only_the_asked_parts_run_and_the_file_says_so(result):
    data, stdout = result
    assert data["parts_done"] == ["kernel_grid", "hf_generate"] and data["complete"]
    assert {r["what"] for r in data["rows"]} == {"kernel_grid", "hf_generate_per_token"}
    assert "kernel_grid gemm" in stdout and "hf_generate_per_token" in stdout


def test_every_family_is_measured_without_errors(grid):
    assert set(grid["family"]) == {"gemm", "attn_prefill", "attn_decode"}
    assert set(grid["dtype"]) == {"bf16", "fp8"}
    assert "error" not in grid.columns, grid.get("error")


def test_rows_carry_the_store_columns_and_positive_times(grid):
    missing = set(STORE_COLUMNS) - set(PROVENANCE) - set(grid.columns)
    assert not missing
    assert set(grid["timing"]) <= set(TIMING_METHODS)
    assert all(math.isfinite(t) and t > 0 for t in grid["latency_s"])
    checked = check_measurements(grid.assign(**PROVENANCE))
    assert len(checked) == len(grid)


def test_flops_and_bytes_follow_the_store_conventions(grid):
    gemm = grid[grid["family"] == "gemm"]
    m, n, k = (gemm[c].to_numpy(float) for c in "mnk")
    e = gemm["dtype"].map(ELEM).to_numpy(float)
    np.testing.assert_allclose(gemm["flops"], 2 * m * n * k)
    np.testing.assert_allclose(gemm["bytes"], m * k * e + n * k * e + m * n * 2)
    attn = grid[grid["family"] != "gemm"]
    np.testing.assert_allclose(attn["b"], attn["batch"] * attn["heads"])
    np.testing.assert_array_equal(attn["k"], attn["head_dim"])
    pre = grid[grid["family"] == "attn_prefill"]
    pairs = attended_keys(pre["q_len"].to_numpy(float), np.zeros(len(pre)), None)
    np.testing.assert_allclose(pre["flops"], 4 * pre["b"] * pre["head_dim"] * pairs)
    dec = grid[grid["family"] == "attn_decode"]
    assert (dec["m"] == 1).all() and (dec["n"] == dec["kv_len"]).all()
    np.testing.assert_allclose(dec["flops"], 4 * dec["b"] * dec["head_dim"] * dec["kv_len"])
    kv_bytes = dec["batch"] * dec["kv_len"] * 2 * dec["kv_heads"] * dec["head_dim"] * 2
    assert (dec["bytes"] > kv_bytes).all()


def test_perfcast_prices_every_row(grid):
    ops = measurement_ops(grid)
    assert len(ops) == len(grid)
    times = default_time_model().kernel_times(ops, get_device("h100-sxm"))
    assert np.isfinite(times).all() and (times > 0).all()


def test_hf_generate_gives_a_per_token_time(result):
    (row,) = [r for r in result[0]["rows"] if r["what"] == "hf_generate_per_token"]
    assert math.isfinite(row["ms"]) and row["t16_s"] > 0 and row["t4_s"] > 0  # CPU: noisy


def test_an_unknown_part_is_refused(tmp_path):
    done = _run(tmp_path / "x.json", "--parts", "kernel_grid,nope")
    assert done.returncode == 2 and "nope" in done.stderr
    assert not (tmp_path / "x.json").exists()
