"""The torch CPU microbenchmark: eager-vocabulary rows in the store schema, and `perfcast
measure --backend torch`. Tests that time kernels skip without torch; the missing-torch
message is checked either way."""

import builtins
import json

import pytest
from typer.testing import CliRunner

from perfcast.cli import app
from perfcast.errors import InputError
from perfcast.measure import (
    STORE_COLUMNS,
    TORCH_OPS,
    check_measurements,
    measure_torch_dispatch_s,
    run_torch_cpu_sweep,
    torch_sweep_shapes,
)
from perfcast.ops import cnn_ops

pytestmark = pytest.mark.cpu_timing  # run alone, after the rest (tests/conftest.py)

SMALL = {"linear": [(4, 32, 48)], "bmm": [(2, 8, 16, 4)], "conv": [(1, 3, 16, 8, 3, 2)],
         "add": [(8, 40)], "where": [(24, 8)], "copy": [(4, 128)], "maxpool": [(4, 9)],
         "bn": [(4, 9)], "relu": [(8, 40)], "ln": [(8, 40)], "embedding": [(5, 16)]}


@pytest.fixture
def no_torch(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("no torch here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)


def test_without_torch_the_error_names_the_extra(no_torch, tmp_path):
    for call in (run_torch_cpu_sweep, measure_torch_dispatch_s):
        with pytest.raises(InputError) as err:
            call()
        assert "perfcast[torch]" in str(err.value)
    res = CliRunner().invoke(app, ["measure", "--out", str(tmp_path / "t.csv"), "--backend",
                                   "torch", "--quick"])
    assert res.exit_code == 2 and "perfcast[torch]" in res.stderr


def test_shapes_are_seeded_and_cover_every_op():
    quick = torch_sweep_shapes(quick=True, seed=0)
    assert set(quick) == set(TORCH_OPS)
    assert quick == torch_sweep_shapes(quick=True, seed=0)
    assert quick != torch_sweep_shapes(quick=True, seed=1)
    full = torch_sweep_shapes(quick=False, seed=0)
    assert all(len(full[op]) > len(quick[op]) for op in TORCH_OPS)
    assert all(n % 64 == 0 for _, n in quick["copy"])
    # the vocabulary-wide lm_head of GPT-2 and ResNet's 7x7 stem are in range
    assert max(n for _, n, _ in quick["linear"]) > 8000
    assert (1, 3, 224, 64, 7, 2) in quick["conv"]


def test_unknown_ops_and_bad_shapes_are_clear_errors():
    with pytest.raises(InputError, match="did you mean linear"):
        run_torch_cpu_sweep(ops=["lineer"])
    with pytest.raises(InputError, match="ops.conv"):
        run_torch_cpu_sweep(ops={"conv": [(1, 3, 16)]})
    with pytest.raises(InputError, match="repeats"):
        run_torch_cpu_sweep(repeats=0)


def test_sweep_rows_follow_the_vocabulary_and_the_store_schema():
    pytest.importorskip("torch")
    df = run_torch_cpu_sweep(ops=SMALL, repeats=2)
    assert list(df.columns) == list(STORE_COLUMNS)
    check_measurements(df)
    assert len(df) == len(SMALL)
    assert set(df["device"]) == {"local-cpu"} and set(df["timing"]) == {"cpu_wallclock"}
    assert set(df["dtype"]) == {"fp32"} and set(df["source"]) == {"local"}
    assert (df["family"] == df["op"].map(TORCH_OPS)).all()
    assert (df["latency_s"] > 0).all()
    row = df.set_index("op")
    assert tuple(row.loc["linear", ["b", "m", "n", "k"]]) == (1, 4, 32, 48)
    assert row.loc["linear", "flops"] == 2 * 4 * 32 * 48
    assert tuple(row.loc["bmm", ["b", "m", "n", "k"]]) == (2, 8, 16, 4)
    # conv as an implicit GEMM: 8x8 output pixels, C_out, C_in x 3 x 3
    assert tuple(row.loc["conv", ["m", "n", "k"]]) == (64, 8, 27)
    assert row.loc["add", "bytes"] == 3 * 4 * 8 * 40  # two reads, one write
    assert row.loc["where", "bytes"] == 2 * 4 * 24 * 8  # the mask is broadcast
    assert row.loc["embedding", "flops"] == 0


def test_sweep_and_cnn_tables_count_a_kernel_alike():
    """The same conv / bn / pool kernel has the same FLOPs and bytes in both."""
    pytest.importorskip("torch")
    ops = cnn_ops("resnet18", 1, 64)
    stem = ops.iloc[:4]  # conv 7x7/2, bn, relu, maxpool at 32x32
    df = run_torch_cpu_sweep(ops={"conv": [(1, 3, 64, 64, 7, 2)], "bn": [(64, 32)],
                                  "relu": [(64, 1024)], "maxpool": [(64, 32)]}, repeats=1)
    for (_, table_row), (_, sweep_row) in zip(stem.iterrows(), df.iterrows(), strict=True):
        assert table_row["op"] == sweep_row["op"]
        assert (table_row["m"], table_row["n"], table_row["k"]) == (
            sweep_row["m"], sweep_row["n"], sweep_row["k"])
        assert table_row["flops"] == sweep_row["flops"]
        assert table_row["bytes_read"] + table_row["bytes_written"] == sweep_row["bytes"]


def test_dispatch_is_microseconds():
    pytest.importorskip("torch")
    assert 1e-8 < measure_torch_dispatch_s(repeats=3, inner=200) < 1e-4


def test_measure_cli_torch_backend(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "torch.csv"
    res = CliRunner().invoke(app, ["measure", "--out", str(out), "--backend", "torch",
                                   "--quick", "--repeats", "1", "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["device"] == "local-cpu" and summary["rows"] > 100
    spec = summary["device_spec"]
    assert "torch" in spec["sources"]["kernel_launch_overhead_s"]
    families = {r["family"] for r in summary["summary"]}
    assert {"gemm", "conv", "elementwise", "norm", "embedding"} <= families


def test_measure_cli_rejects_unknown_backends(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["measure", "--out", str(tmp_path / "a.csv"), "--backend", "jax"])
    assert res.exit_code == 2 and "numpy, torch" in res.stderr
    res = runner.invoke(app, ["measure", "--out", str(tmp_path / "a.csv"), "--device", "cuda",
                              "--backend", "numpy"])
    assert res.exit_code == 2 and "torch" in res.stderr
