"""The one error boundary (`perfcast.cli._common.guarded`): an exception perfcast did not
expect is one line and exit 1, never a traceback, unless debug is on (`--debug`)."""

import pytest
from typer.testing import CliRunner

from perfcast.cli import _common, _infer, app

runner = CliRunner()
ARGS = ["infer", "--model", "gpt2", "--gpu", "h100-sxm"]


@pytest.fixture
def broken(monkeypatch):
    """`infer` whose forecast raises what no check anticipated."""
    def boom(request, progress=None):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(_common, "run", boom)  # the one `api.run` every command calls
    yield
    _common.set_debug(False)


def test_an_unexpected_error_is_one_line_and_exit_1(broken):
    res = runner.invoke(app, ARGS)
    assert res.exit_code == 1
    assert isinstance(res.exception, SystemExit)  # typer's exit, not the error itself
    assert res.stderr.strip() == ("error: internal error (ZeroDivisionError: float division by "
                                  "zero): run with --debug for the traceback")
    assert "Traceback" not in res.output


def test_debug_lets_the_traceback_through(broken):
    res = runner.invoke(app, ["--debug", *ARGS])  # the global flag sets it
    assert isinstance(res.exception, ZeroDivisionError)
    assert runner.invoke(app, ARGS).exit_code == 1  # per invocation: it does not leak
    _common.set_debug(True)  # the library switch, for callers of the command functions
    try:
        with pytest.raises(ZeroDivisionError):
            _infer.infer(model="gpt2", gpu="h100-sxm")
    finally:
        _common.set_debug(False)


def test_input_errors_still_exit_2_and_exits_pass_through():
    res = runner.invoke(app, ["infer", "--model", "gpt2", "--gpu", "z100"])
    assert res.exit_code == 2 and res.stderr.startswith("error: gpu:")
    assert runner.invoke(app, ["models", "--json"]).exit_code == 0
