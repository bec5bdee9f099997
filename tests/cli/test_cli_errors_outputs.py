"""Every file or folder perfcast writes is checked before any work (an existing folder that
is writable, not a folder where a file goes, never an existing file), and an OSError at write
time is an InputError naming the option: one line, exit 2, never a traceback."""

import errno
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfcast.cli import app

runner = CliRunner()

TRAIN = ["train", "--model", "gpt2", "--gpu", "h100-sxm", "--num-gpus", "1"]


def _refused(args, option: str, *words: str):
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    line = res.stderr.strip()
    assert line.startswith(f"error: {option}:") and "\n" not in line, line
    for word in words:
        assert word in line, line
    return line


@pytest.fixture
def afile(tmp_path) -> Path:
    path = tmp_path / "afile"
    path.write_text("mine")
    return path


def test_train_trace_out_in_a_missing_folder_or_under_a_file(tmp_path, afile):
    _refused([*TRAIN, "--trace-out", str(tmp_path / "missing/dir/t.json")], "trace_out",
             "does not exist")
    _refused([*TRAIN, "--trace-out", str(afile / "t.json")], "trace_out", "not a folder")
    _refused([*TRAIN, "--trace-out", str(tmp_path)], "trace_out", "is a folder")


def test_suite_and_validate_out_under_a_file(afile):
    _refused(["suite", "--only", "I1.1", "--workers", "1", "--out", str(afile / "s")], "out",
             "not a folder")
    _refused(["validate", "models", "--out", str(afile / "v")], "out", "not a folder")
    assert afile.read_text() == "mine"


def test_measure_step_serve_plot_and_calibrate_outputs(tmp_path, afile):
    folder = tmp_path / "adir.csv"
    folder.mkdir()
    _refused(["measure", "--quick", "--repeats", "1", "--out", str(folder), "--force"], "out",
             "is a folder")
    _refused(["measure", "--quick", "--out", str(afile / "m.csv")], "out", "not a folder")
    _refused(["step", "--model", "gpt2", "--trace", str(tmp_path / "no/t.json")], "trace",
             "does not exist")
    _refused(["serve", "--qps", "1", "--num-requests", "2", "--out", str(afile / "r.csv")],
             "out", "not a folder")
    _refused(["plot", "breakdown", "--model", "gpt2", "--gpu", "h100-sxm", "--out",
              str(afile / "x.png")], "out", "not a folder")
    _refused(["calibrate", "--measurements", str(afile), "--device", "h100-sxm", "--out",
              str(tmp_path / "no/c.json")], "out", "does not exist")


def test_an_unwritable_folder_is_refused_before_any_work(tmp_path, monkeypatch):
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: (
        False if Path(p) == tmp_path else real(p, mode, **kw)))
    _refused([*TRAIN, "--trace-out", str(tmp_path / "t.json")], "trace_out", "not writable")
    _refused(["suite", "--only", "I1.1", "--out", str(tmp_path / "s")], "out", "not writable")


def test_an_oserror_while_writing_names_the_option(tmp_path, monkeypatch):
    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_text", full)
    _refused([*TRAIN, "--trace-out", str(tmp_path / "t.json")], "trace_out", "cannot write",
             os.strerror(errno.ENOSPC))
