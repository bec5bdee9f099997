"""The local microbenchmark harness, the local CPU as a Device, and `perfcast measure`."""

import json

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

import perfcast.measure as measure_pkg  # what api._measure runs, looked up per run
from perfcast.cli._measure import measure
from perfcast.errors import InputError
from perfcast.measure import run_gpu_sweep
from perfcast.measure._cpu import fp32_flops_per_cycle, local_cpu_device
from perfcast.measure._harness import (
    FAMILIES,
    family_cost,
    run_cpu_sweep,
    sweep_shapes,
)
from perfcast.measure._schema import STORE_COLUMNS
from perfcast.specs import Device

SMALL = {"gemm": [(16, 16, 16), (512, 512, 512), (33, 70, 129)],
         "elementwise": [(1, 256), (64, 1000)], "activation": [(8, 512)],
         "softmax": [(8, 512)], "norm": [(8, 512)]}


@pytest.fixture(scope="module")
def small_sweep():
    return run_cpu_sweep(shapes=SMALL, repeats=3)


@pytest.fixture(scope="module")
def cpu_device():
    return local_cpu_device()


def test_sweep_is_in_the_store_schema(small_sweep):
    df = small_sweep
    assert list(df.columns) == list(STORE_COLUMNS)
    assert dict(df.dtypes.astype(str)) == STORE_COLUMNS
    assert len(df) == sum(len(v) for v in SMALL.values())
    assert (df["latency_s"] > 0).all()
    assert set(df["family"]) == set(FAMILIES)
    assert set(df["source"]) == {"local"} and set(df["device"]) == {"local-cpu"}
    assert set(df["timing"]) == {"cpu_wallclock"} and set(df["split"]) == {""}
    assert set(df["dtype"]) == {"fp32"} and set(df["weight_dtype"]) == {"fp32"}
    assert set(df["kv_dtype"]) == {""}
    attn = ["batch", "heads", "kv_heads", "head_dim", "q_len", "kv_len", "window"]
    assert (df[attn] == 0).all().all()
    assert (df["b"] == 1).all()
    assert df["source_file"].str.startswith("perfcast measure (numpy").all()
    assert (df.loc[df["family"] != "gemm", "k"] == 0).all()


def test_bigger_gemms_take_longer(small_sweep):
    gemm = small_sweep[small_sweep["family"] == "gemm"].set_index(["m", "n", "k"])["latency_s"]
    assert gemm[(512.0, 512.0, 512.0)] > 10 * gemm[(16.0, 16.0, 16.0)]


def test_flops_and_bytes_follow_ops_conventions(small_sweep):
    assert family_cost("gemm", 2, 3, 5) == (60.0, 4.0 * (10 + 15 + 6))
    assert family_cost("elementwise", 4, 8) == (32.0, 12.0 * 32)
    assert family_cost("activation", 4, 8) == (8.0 * 32, 8.0 * 32)
    assert family_cost("softmax", 4, 8) == (5.0 * 32, 8.0 * 32)
    assert family_cost("norm", 4, 8) == (5.0 * 32, 8.0 * 32 + 8.0 * 8)
    assert family_cost("gemm", 2, 3, 5, elem_bytes=2)[1] == 2.0 * 31
    for row in small_sweep.itertuples():
        assert (row.flops, row.bytes) == family_cost(row.family, row.m, row.n, row.k)
    with pytest.raises(InputError, match="family"):
        family_cost("conv3d", 1, 1)


def test_shape_list_is_deterministic_and_quick_is_smaller():
    assert sweep_shapes(quick=True, seed=3) == sweep_shapes(quick=True, seed=3)
    assert sweep_shapes(quick=True, seed=3) != sweep_shapes(quick=True, seed=4)
    quick, full = sweep_shapes(quick=True), sweep_shapes(quick=False)
    assert set(quick) == set(full) == set(FAMILIES)
    for family in FAMILIES:
        assert 0 < len(quick[family]) < len(full[family])
    assert (16, 16, 16) in quick["gemm"] and (512, 512, 512) in quick["gemm"]


def test_sweep_rejects_bad_arguments():
    with pytest.raises(InputError, match="repeats"):
        run_cpu_sweep(shapes=SMALL, repeats=0)
    with pytest.raises(InputError, match="families"):
        run_cpu_sweep(families=["gemm", "fft"])
    with pytest.raises(InputError, match="shapes.gemm"):
        run_cpu_sweep(families=["gemm"], shapes={"gemm": [(16, 16, 0)]})


def test_families_subset_runs_only_those():
    df = run_cpu_sweep(families=["softmax"], shapes={"softmax": [(2, 64)]}, repeats=1)
    assert list(df["family"]) == ["softmax"] and list(df["m"]) == [2.0]


def test_gpu_sweep_without_cuda_is_an_input_error():
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present")
    with pytest.raises(InputError, match="device"):
        run_gpu_sweep(quick=True)


def test_local_cpu_device(cpu_device):
    d = cpu_device
    assert isinstance(d, Device) and d.name == "local-cpu" and d.sm_count == 1
    assert d.peak_flops("fp32") > 0 and d.dtypes == ["fp32"]
    assert d.hbm_bandwidth_bps > 0 and d.hbm_capacity_bytes > 0
    assert 0 < d.kernel_launch_overhead_s < 1e-3
    assert "dense_peak_flops.fp32" in d.sources and "measured" in d.sources["hbm_bandwidth_bps"]
    assert Device.model_validate(d.model_dump(mode="json")) == d


def test_local_cpu_device_without_measuring_bandwidth_uses_the_default():
    d = local_cpu_device(threads=2, measure_bandwidth=False)
    assert d.sm_count == 2 and d.hbm_bandwidth_bps == 16e9
    assert "default" in d.sources["hbm_bandwidth_bps"]
    with pytest.raises(InputError, match="threads"):
        local_cpu_device(threads=0)


def test_flops_per_cycle_from_isa_flags():
    assert fp32_flops_per_cycle({"avx512f", "avx2", "fma"})[0] == 64
    assert fp32_flops_per_cycle({"avx2", "fma"})[0] == 32
    assert fp32_flops_per_cycle({"avx2"})[0] == 8
    assert fp32_flops_per_cycle({"sse", "sse2"})[0] == 8


# ------------------------------------------------------------------ the CLI command


@pytest.fixture
def cli(monkeypatch):
    """A tiny app with only `measure`, its sweep and device narrowed to run in well under 1 s."""
    app = typer.Typer()
    app.command("measure")(measure)
    app.command("noop")(lambda: None)  # two commands: `measure` stays a subcommand
    monkeypatch.setattr(measure_pkg, "run_cpu_sweep", lambda **kw: run_cpu_sweep(
        shapes={"gemm": [(16, 16, 16)], "norm": [(4, 64)]}, families=["gemm", "norm"],
        repeats=kw["repeats"]))
    monkeypatch.setattr(measure_pkg, "local_cpu_device",
                        lambda threads=1: local_cpu_device(threads, measure_bandwidth=False))
    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["measure", *args])


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_measure_writes_rows_and_the_device_spec(cli, tmp_path, suffix):
    out = tmp_path / f"local{suffix}"
    result = cli("--out", str(out), "--quick", "--repeats", "2", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["rows"] == 2 and payload["path"] == str(out)
    assert payload["device"] == "local-cpu"
    df = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
    assert list(df.columns) == list(STORE_COLUMNS) and len(df) == 2
    spec = Device.model_validate_json((tmp_path / f"local{suffix}.device.json").read_text())
    assert spec.name == "local-cpu"


def test_measure_prints_a_summary_table(cli, tmp_path):
    result = cli("--out", str(tmp_path / "m.csv"))
    assert result.exit_code == 0, result.output
    assert "gemm" in result.stdout and "norm" in result.stdout


def test_measure_refuses_to_overwrite(cli, tmp_path):
    out = tmp_path / "m.csv"
    out.write_text("keep me")
    result = cli("--out", str(out))
    assert result.exit_code == 2
    assert "out:" in result.output and "--force" in result.output
    assert "Traceback" not in result.output
    assert out.read_text() == "keep me"
    assert cli("--out", str(out), "--force").exit_code == 0
    assert out.read_text() != "keep me"


def test_measure_rejects_a_bad_suffix_and_device(cli, tmp_path):
    result = cli("--out", str(tmp_path / "m.xlsx"))
    assert result.exit_code == 2
    assert "out:" in result.output and ".parquet" in result.output and ".csv" in result.output
    assert not (tmp_path / "m.xlsx").exists()
    result = cli("--out", str(tmp_path / "m.csv"), "--device", "tpu")
    assert result.exit_code == 2 and "device:" in result.output
    result = cli("--out", str(tmp_path / "m.csv"), "--repeats", "0")
    assert result.exit_code == 2 and "repeats:" in result.output


def test_quick_sweep_covers_every_default_shape():
    df = run_cpu_sweep(quick=True, repeats=1)
    assert len(df) == sum(len(v) for v in sweep_shapes(quick=True).values())
    assert (df["latency_s"] > 0).all() and list(df.columns) == list(STORE_COLUMNS)


def test_subprocess_fallback_without_threadpoolctl_gives_the_same_schema():
    from perfcast.measure._harness import _sweep_in_single_thread_subprocess

    df = _sweep_in_single_thread_subprocess({"gemm": [(16, 16, 16)], "norm": [(2, 64, 0)]}, 2, 0)
    assert dict(df.dtypes.astype(str)) == STORE_COLUMNS
    assert list(df["family"]) == ["gemm", "norm"] and (df["latency_s"] > 0).all()


def test_measure_cuda_without_a_gpu_is_one_line_and_exit_2(cli, tmp_path):
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present")
    result = cli("--out", str(tmp_path / "g.csv"), "--device", "cuda")
    assert result.exit_code == 2 and "device:" in result.output
    assert not (tmp_path / "g.csv").exists()
