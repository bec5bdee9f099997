"""Issue 16 item 4: long work reports progress(done, total) to a callback the library takes
without knowing Rich (the CLI draws it as a bar with an ETA on stderr, only in a terminal and
never with --json), and Ctrl-C says what was saved and exits 130."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from rich.console import Console
from typer.testing import CliRunner

import perfcast.cli._progress as cli_progress
import perfcast.cli._sweep as cli_sweep
import perfcast.measure as measure_pkg  # what api._measure runs, looked up per run
import perfcast.measure._harness as harness
import perfcast.validate._collectives as collectives_module
import perfcast.validate._kernels as kernels_module
import perfcast.validate._models as models_module
import perfcast.validate._reports as reports
from perfcast import progress
from perfcast.api import CapacityRequest, MeasureRequest, ServeRequest, TrainRequest, run
from perfcast.cli import app
from perfcast.measure import (
    STORE_COLUMNS,
    local_cpu_device,
    run_cpu_sweep,
    run_torch_cpu_sweep,
)
from perfcast.sweep import run_sweep
from perfcast.validate import (
    collectives_report,
    kernels_report,
    load_model_labels,
    load_training_points,
    validate_models,
    validate_training,
)

runner = CliRunner()
CAPACITY = ["--model", "llama-3-8b", "--gpu", "h100-sxm", "--tp", "4,8", "--num-requests",
            "20", "--workers", "1"]
SWEEP = ["sweep", "--command", "collective", "--set", "gpu=h100-sxm", "--set", "bytes=1MB",
         "--grid", "num_gpus=2,4,8", "--grid", "op=all_reduce,all_gather", "--workers", "1"]


def _measured(point, time_model=None):
    """A stand-in serving forecast: the measured values themselves (instant)."""
    return float(point["ttft_s"]), float(point["tpot_s"])


def _check_steps(calls: list[tuple[int, int]]) -> None:
    """Increasing done, a constant total, ending at (total, total)."""
    assert calls, "progress was never reported"
    done = [d for d, _ in calls]
    assert done == sorted(done) and len(set(done)) == len(done)
    assert len({n for _, n in calls}) == 1
    assert calls[-1][0] == calls[-1][1]


def test_serving_report_progress_counts_every_point_of_every_method(monkeypatch):
    monkeypatch.setattr(reports, "analytic_point", _measured)
    calls: list[tuple[int, int]] = []
    report = reports.serving_report(["sum_of_kernels", "roofline"], points_per_group=1,
                                    arch="dense", progress=lambda d, n: calls.append((d, n)))
    _check_steps(calls)
    points = int(report.rows.query("split == 'all' and group == 'all/ttft'")["n"].iloc[0])
    assert calls[-1] == (2 * points, 2 * points)


def test_capacity_progress_per_candidate_and_same_result():
    request = CapacityRequest.from_options({"model": "llama-3-8b", "gpu": "h100-sxm",
                                            "tp": "4,8", "num_requests": 20, "workers": 1})
    calls: list[tuple[int, int]] = []
    result = run(request, progress=lambda d, n: calls.append((d, n)))
    assert calls == [(1, 2), (2, 2)]
    assert result.payload() == run(request).payload()


def test_sweep_progress_callback(tmp_path):
    calls: list[tuple[int, int]] = []
    points = [{"x": i} for i in range(5)]
    run_sweep(points, lambda p: {"y": p["x"]}, tmp_path / "a", workers=1,
              progress=lambda d, n: calls.append((d, n)))
    _check_steps(calls)
    assert calls[-1] == (5, 5)
    calls.clear()  # a resumed sweep counts the reused points as done
    run_sweep([*points, {"x": 5}], lambda p: {"y": p["x"]}, tmp_path / "a", workers=1,
              progress=lambda d, n: calls.append((d, n)))
    assert calls == [(6, 6)]


def test_bar_off_with_json_or_without_a_terminal(monkeypatch):
    monkeypatch.setattr(cli_progress, "is_terminal", lambda stderr=False: True)
    assert cli_progress.wants_bar(quiet=False)
    assert not cli_progress.wants_bar(quiet=True)
    monkeypatch.setattr(cli_progress, "is_terminal", lambda stderr=False: False)
    assert not cli_progress.wants_bar(quiet=False)
    with cli_progress.progress_bar("x") as bar:
        assert bar is None  # the library is given no callback: nothing to report


def test_bar_draws_in_a_terminal(monkeypatch):
    monkeypatch.setattr(cli_progress, "is_terminal", lambda stderr=False: True)
    with cli_progress.progress_bar("x") as bar:
        bar(1, 2)
        bar(2, 2)


def test_serve_reports_every_thousand_requests():
    calls: list[tuple[int, int]] = []
    request = ServeRequest.from_options({"model": "llama-2-7b", "gpu": "h100-sxm",
                                         "num_requests": 2500, "qps": 50})
    result = run(request, progress=lambda d, n: calls.append((d, n)))
    assert calls[-1] == (2500, 2500) and len(calls) >= 3
    assert [d for d, _ in calls] == sorted({d for d, _ in calls})
    assert result.payload() == run(request).payload()


def test_capacity_json_unchanged_and_stderr_clean(monkeypatch):
    # even in a terminal, --json draws no bar: stdout is exactly the payload
    monkeypatch.setattr(cli_progress, "is_terminal", lambda stderr=False: True)
    res = runner.invoke(app, ["capacity", *CAPACITY, "--json"])
    assert res.exit_code == 0, res.output
    request = CapacityRequest.from_options({"model": "llama-3-8b", "gpu": "h100-sxm",
                                            "tp": "4,8", "num_requests": 20, "workers": 1})
    assert res.stdout == json.dumps(run(request).payload(), indent=2) + "\n"
    assert res.stderr == ""


def test_validate_serving_json_unchanged(monkeypatch):
    monkeypatch.setattr(reports, "analytic_point", _measured)
    monkeypatch.setattr(cli_progress, "is_terminal", lambda stderr=False: True)
    args = ["--method", "sum_of_kernels", "--points-per-group", "1", "--arch", "dense"]
    res = runner.invoke(app, ["validate", "serving", *args, "--json"])
    assert res.exit_code == 0, res.output
    direct = reports.serving_report(["sum_of_kernels"], points_per_group=1, arch="dense")
    assert res.stdout == json.dumps(direct.payload(), indent=2) + "\n"
    assert res.stderr == ""


def _raise_after(count: int, fn):
    """`fn`, which raises KeyboardInterrupt (a Ctrl-C) on its call number count + 1."""
    calls = {"n": 0}

    def wrapped(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > count:
            raise KeyboardInterrupt
        return fn(*args, **kwargs)

    return wrapped


def test_sweep_ctrl_c_says_what_was_saved_and_resumes(tmp_path, monkeypatch):
    out = tmp_path / "sweep-tp"
    monkeypatch.setattr(cli_sweep, "run_point", _raise_after(4, cli_sweep.run_point))
    res = runner.invoke(app, [*SWEEP, "--out", str(out)])
    assert res.exit_code == 130
    assert res.stderr.strip() == (f"interrupted: 4 of 6 points saved in {out}/; rerun the "
                                  "same command to resume")
    monkeypatch.undo()
    res = runner.invoke(app, [*SWEEP, "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    assert (payload["computed"], payload["reused"]) == (2, 4)


def test_validate_serving_ctrl_c_with_out(tmp_path, monkeypatch):
    monkeypatch.setattr(reports, "analytic_point", _raise_after(2, _measured))
    out = tmp_path / "report"
    res = runner.invoke(app, ["validate", "serving", "--method", "sum_of_kernels",
                              "--points-per-group", "1", "--out", str(out)])
    assert res.exit_code == 130
    assert res.stderr.strip() == (f"interrupted: nothing written to {out}/ (a check writes "
                                  "its reports when it finishes); rerun the same command")
    assert not (out / "serving.csv").exists()


def test_suite_ctrl_c_says_how_far_it_got(tmp_path, monkeypatch):
    import perfcast.cli._suite as cli_suite

    real = cli_suite.run_suite

    def interrupted_suite(scenarios, workers, on_done):
        def hook(result):
            on_done(result)
            raise KeyboardInterrupt

        return real(scenarios, workers=1, on_done=hook)

    monkeypatch.setattr(cli_suite, "run_suite", interrupted_suite)
    out = tmp_path / "suite"
    res = runner.invoke(app, ["suite", "--only", "I1.1,T1.1", "--out", str(out)])
    assert res.exit_code == 130
    assert res.stderr.strip().startswith(f"interrupted: 1 of 2 scenarios had run; nothing "
                                         f"saved in {out}/")
    assert not (out / "suite.json").exists()


@pytest.mark.parametrize("json_out", [False, True])
def test_ctrl_c_without_out_is_plain(monkeypatch, json_out):
    """Without --out nothing could be kept: Ctrl-C stops as it always did (no message)."""
    monkeypatch.setattr(reports, "analytic_point", _raise_after(0, _measured))
    args = ["validate", "serving", "--method", "sum_of_kernels", "--points-per-group", "1"]
    res = runner.invoke(app, args + (["--json"] if json_out else []))
    assert res.exit_code != 0 and "interrupted:" not in res.stderr


def test_serve_json_unchanged_in_a_terminal(monkeypatch):
    monkeypatch.setattr(cli_progress, "is_terminal", lambda stderr=False: True)
    args = {"model": "llama-2-7b", "gpu": "h100-sxm", "num_requests": 1200, "qps": 20}
    res = runner.invoke(app, ["serve", "--model", "llama-2-7b", "--gpu", "h100-sxm",
                              "--num-requests", "1200", "--qps", "20", "--json"])
    assert res.exit_code == 0, res.output
    expected = run(ServeRequest.from_options(args)).payload()
    assert res.stdout == json.dumps(expected, indent=2) + "\n"
    assert res.stderr == ""


def test_validate_all_ctrl_c_names_the_finished_checks(tmp_path, monkeypatch):
    import perfcast.cli._validate as cli_validate

    real = cli_validate._all_checks

    def checks(quick, sub):
        steps = real(quick, sub)
        assert [name for name, _, _ in steps] == ["kernels", "models", "serving-agg",
                                                  "serving-disagg", "training", "collectives"]
        quick_ones = {"kernels", "models"}  # stand-ins: their folder, at once
        return [(name, title, (lambda n=name: sub(n).mkdir(parents=True))
                 if name in quick_ones else run_check) for name, title, run_check in steps]

    monkeypatch.setattr(cli_validate, "_all_checks", checks)
    monkeypatch.setattr(reports, "engine_point", _raise_after(0, _measured))
    out = tmp_path / "all"
    res = runner.invoke(app, ["validate", "all", "--quick", "--out", str(out)])
    assert res.exit_code == 130
    lines = res.stderr.strip().splitlines()
    assert lines[-2] == (f"interrupted: nothing written to {out / 'serving-agg'}/ (a check "
                         "writes its reports when it finishes); rerun the same command")
    assert lines[-1] == f"kept: the finished checks' reports in {out}/: kernels, models"


# --- measure, validate kernels/models/training/collectives, train --sweep, validate all -----

SHAPES = {"gemm": [(16, 16, 16), (32, 16, 8)], "norm": [(4, 64), (2, 32)]}  # 4 rows, instant


def _recorder() -> tuple[list[tuple[int, int]], progress.ProgressFn]:
    calls: list[tuple[int, int]] = []
    return calls, lambda done, total: calls.append((done, total))


@pytest.fixture
def small_measure(monkeypatch):
    """`perfcast measure` narrowed to SHAPES, its device spec not measured (well under 1 s)."""
    monkeypatch.setattr(measure_pkg, "run_cpu_sweep", lambda **kw: run_cpu_sweep(
        shapes=SHAPES, families=list(SHAPES), repeats=1, progress=kw["progress"]))
    monkeypatch.setattr(measure_pkg, "local_cpu_device",
                        lambda threads=1: local_cpu_device(threads, measure_bandwidth=False))


def test_cpu_and_torch_sweeps_report_every_row():
    calls, record = _recorder()
    df = run_cpu_sweep(shapes=SHAPES, families=list(SHAPES), repeats=1, progress=record)
    assert calls == [(i, 4) for i in range(1, 5)] and len(df) == 4
    pytest.importorskip("torch")
    calls.clear()
    run_torch_cpu_sweep(ops={"add": [(4, 64)], "relu": [(4, 64), (2, 32)]}, repeats=1,
                        progress=record)
    assert calls == [(1, 3), (2, 3), (3, 3)]


def test_measure_progress_counts_rows_and_same_result(small_measure, tmp_path):
    calls, record = _recorder()
    request = MeasureRequest.from_options({"out": str(tmp_path / "m.csv")})
    result = run(request, progress=record)
    assert calls == [(i, 4) for i in range(1, 5)]
    assert len(result.measurements) == 4 and result.device_path.exists()


def test_measure_ctrl_c_keeps_the_rows_timed(small_measure, tmp_path, monkeypatch):
    out = tmp_path / "m.csv"
    stale = tmp_path / "m.csv.device.json"
    stale.write_text("{}")  # an earlier run's spec: it would describe other rows
    monkeypatch.setattr(harness, "_time_cpu", _raise_after(2, harness._time_cpu))
    res = runner.invoke(app, ["measure", "--out", str(out), "--force"])
    assert res.exit_code == 130
    assert res.stderr.strip() == (f"interrupted: 2 of 4 rows timed so far written to {out} "
                                  "(no device spec); a rerun starts over: the same command "
                                  "with --force")
    df = pd.read_csv(out)
    assert len(df) == 2 and list(df.columns) == list(STORE_COLUMNS)
    assert [p.name for p in tmp_path.iterdir()] == ["m.csv"]  # no spec, no temporary file


@pytest.mark.parametrize("where", ["first shape", "before the sweep"])
def test_measure_ctrl_c_before_any_row_writes_nothing(small_measure, tmp_path, monkeypatch,
                                                      where):
    if where == "first shape":
        monkeypatch.setattr(harness, "_time_cpu", _raise_after(0, harness._time_cpu))
    else:  # e.g. while torch loads: a plain KeyboardInterrupt, no rows to carry
        monkeypatch.setattr(measure_pkg, "run_cpu_sweep", _raise_after(0, run_cpu_sweep))
    res = runner.invoke(app, ["measure", "--out", str(tmp_path / "m.csv")])
    assert res.exit_code == 130
    assert res.stderr.strip() == ("interrupted: no shape had been timed; nothing written. "
                                  "Rerun the same command")
    assert list(tmp_path.iterdir()) == []


def test_validate_kernels_progress_per_held_out_device():
    calls, record = _recorder()
    report = kernels_report(["neusight"], train_rows=10, test_rows=10, progress=record,
                            learned=False)
    assert calls == [(1, 3), (2, 3), (3, 3)]
    assert report.rows["device"].nunique() == 3


def test_validate_models_progress_per_configuration_then_per_op_label():
    labels = load_model_labels()
    labels = pd.concat([labels[labels["variant"] == ""].head(3),
                        labels[labels["variant"] != ""].head(2)])
    calls, record = _recorder()
    rows, _ = validate_models(labels, progress=record)
    assert calls == [(i, 8) for i in range(1, 9)]  # 5 forecasts, then 3 single-GPU traces
    assert set(rows["split"]) == {"models", "per_op"}


def test_validate_training_progress_per_point_forecast():
    calls, record = _recorder()
    validate_training(points=load_training_points().head(4),
                      methods=("roofline", "sum_of_kernels"), splits=("all",), progress=record)
    assert calls == [(i, 8) for i in range(1, 9)]  # roofline, then the kernel split


def test_validate_collectives_progress_per_split_and_table():
    calls, record = _recorder()
    report = collectives_report(["fit:p2p", "held-out:source"], table7=True, progress=record)
    assert calls == [(1, 3), (2, 3), (3, 3)] and "table7" in report.extras


def test_nested_work_does_not_move_the_outer_bar():
    """A capacity search's serve probes (in this process) report nothing: the bar counts
    candidates only, and `perfcast.progress.reporting` is restored afterwards."""
    request = CapacityRequest.from_options({"model": "llama-3-8b", "gpu": "h100-sxm",
                                            "tp": "8", "num_requests": 1200, "workers": 1})
    calls, record = _recorder()
    with progress.reporting(record):
        run(request, progress=record)
        assert progress.current() is record
    assert calls == [(1, 1)]
    assert progress.current() is None


def test_train_sweep_reports_plans_and_same_result():
    request = TrainRequest.from_options({"model": "llama-3-8b", "gpu": "h100-sxm",
                                         "num_gpus": 16, "sweep": True})
    calls, record = _recorder()
    result = run(request, progress=record)
    _check_steps(calls)
    assert calls[-1] == (len(result.plans), len(result.plans))
    assert result.payload() == run(request).payload()


@pytest.mark.parametrize("args, module, name", [
    (["kernels", "--split", "neusight", "--train-rows", "10", "--test-rows", "10"],
     kernels_module, "fit_calibration"),
    (["models"], models_module, "forecast_model_label"),
    (["collectives", "--split", "fit:p2p"], collectives_module, "_source_splits"),
])
def test_validate_ctrl_c_with_out_says_nothing_was_written(tmp_path, monkeypatch, args, module,
                                                           name):
    monkeypatch.setattr(module, name, _raise_after(0, getattr(module, name)))
    out = tmp_path / "report"
    res = runner.invoke(app, ["validate", *args, "--out", str(out)])
    assert res.exit_code == 130
    assert res.stderr.strip() == (f"interrupted: nothing written to {out}/ (a check writes "
                                  "its reports when it finishes); rerun the same command")
    assert not out.exists()


def test_validate_all_ctrl_c_in_training_names_the_finished_checks(tmp_path, monkeypatch):
    import perfcast.cli._validate as cli_validate

    real = cli_validate._all_checks

    def checks(quick, sub):  # stand-ins before training: their folder, at once
        return [(name, title, run_check if name in ("training", "collectives")
                 else (lambda n=name: sub(n).mkdir(parents=True)))
                for name, title, run_check in real(quick, sub)]

    monkeypatch.setattr(cli_validate, "_all_checks", checks)
    monkeypatch.setattr(reports, "validate_training", _raise_after(0, validate_training))
    out = tmp_path / "all"
    res = runner.invoke(app, ["validate", "all", "--out", str(out)])
    assert res.exit_code == 130
    lines = res.stderr.strip().splitlines()
    assert lines[-2] == "interrupted: training writes no reports; rerun the same command"
    assert lines[-1] == (f"kept: the finished checks' reports in {out}/: kernels, models, "
                         "serving-agg, serving-disagg")
    assert not (out / "collectives").exists()


@pytest.mark.parametrize("args", [
    ["validate", "kernels", "--split", "neusight", "--train-rows", "10", "--test-rows", "10"],
    ["validate", "collectives", "--split", "fit:p2p"],
    ["train", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--num-gpus", "16", "--sweep"],
])
def test_nothing_is_drawn_off_a_terminal(args):
    """CliRunner's stderr is no terminal: no bar, and no progress lines either (validate
    kernels printed one per held-out device before it had a bar)."""
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert res.stderr == ""


def test_measure_draws_nothing_off_a_terminal(small_measure, tmp_path):
    res = runner.invoke(app, ["measure", "--out", str(tmp_path / "m.csv")])
    assert res.exit_code == 0, res.output
    assert res.stderr == ""


def test_a_stage_begins_every_bar_label_within_it(monkeypatch):
    """`validate all` runs its checks under `progress_stage("3/6 ")`: each check's bar says
    where it stands in the whole."""
    buffer = io.StringIO()
    monkeypatch.setattr(cli_progress, "is_terminal", lambda stderr=False: True)
    monkeypatch.setattr(cli_progress, "new_console", lambda stderr=False: Console(
        file=buffer, force_terminal=True, width=100))
    with cli_progress.progress_stage("3/6 "), cli_progress.progress_bar("training: points") as bar:
        bar(1, 2)
    assert "3/6 training: points" in buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    with cli_progress.progress_bar("training: points") as bar:
        bar(1, 2)
    assert "training: points" in buffer.getvalue() and "3/6" not in buffer.getvalue()
