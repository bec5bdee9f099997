"""Issue 16 item 4: long work reports progress(done, total) to a callback the library takes
without knowing Rich (the CLI draws it as a bar with an ETA on stderr, only in a terminal and
never with --json), and Ctrl-C says what was saved and exits 130."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import perfcast.cli._progress as cli_progress
import perfcast.cli._sweep as cli_sweep
import perfcast.validate._reports as reports
from perfcast.api import CapacityRequest, ServeRequest, run
from perfcast.api._capacity import run_capacity
from perfcast.cli import app
from perfcast.serve._engine import reporting_progress
from perfcast.sweep import run_sweep

runner = CliRunner()
CAPACITY = ["--model", "llama-3-8b", "--gpu", "h100-sxm", "--tp", "4,8", "--num-requests",
            "20", "--workers", "1"]
SWEEP = ["sweep", "--command", "collective", "--set", "gpu=h100", "--set", "bytes=1MB",
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
    result = run_capacity(request, lambda d, n: calls.append((d, n)))
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
    assert cli_progress.wants_bar(json_out=False)
    assert not cli_progress.wants_bar(json_out=True)
    monkeypatch.setattr(cli_progress, "is_terminal", lambda stderr=False: False)
    assert not cli_progress.wants_bar(json_out=False)
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
    with reporting_progress(lambda d, n: calls.append((d, n))):
        result = run(request)
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
