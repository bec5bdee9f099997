"""`perfcast ui`: the Streamlit command it runs, loopback by default, clear errors."""

import importlib.util

import pytest
from typer.testing import CliRunner

import perfcast.cli._ui as ui_cli
from perfcast.cli import app
from perfcast.ui import APP_PATH


@pytest.fixture
def launched(monkeypatch):
    """Run `perfcast ui ...` with the server start replaced: returns the argv it built."""
    seen: list[list[str]] = []
    monkeypatch.setattr(ui_cli, "_serve", lambda argv: seen.append(argv) or 0)

    def invoke(*args: str):
        result = CliRunner().invoke(app, ["ui", *args])
        return result, (seen[-1] if seen else None)
    return invoke


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_binds_loopback_by_default(launched):
    result, argv = launched()
    assert result.exit_code == 0, result.output
    assert argv[1:5] == ["-m", "streamlit", "run", str(APP_PATH)]
    assert _option(argv, "--server.address") == "127.0.0.1"
    assert _option(argv, "--server.port") == "8501"
    assert _option(argv, "--server.headless") == "true"
    assert _option(argv, "--browser.gatherUsageStats") == "false"
    assert "warning" not in result.output


def test_warns_when_binding_beyond_loopback(launched):
    result, argv = launched("--host", "0.0.0.0", "--port", "9000", "--no-headless")
    assert result.exit_code == 0
    assert _option(argv, "--server.address") == "0.0.0.0"
    assert _option(argv, "--server.port") == "9000"
    assert _option(argv, "--server.headless") == "false"
    assert "warning: binding to 0.0.0.0" in result.output


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("localhost", True),
    ("0.0.0.0", False), ("192.168.1.5", False), ("example.org", False)])
def test_is_loopback(host, loopback):
    assert ui_cli.is_loopback(host) is loopback


def test_bad_port_is_one_line_naming_it(launched):
    result, argv = launched("--port", "70000")
    assert result.exit_code == 2
    assert argv is None
    assert "port: 70000 is not a TCP port" in result.output


def test_missing_streamlit_says_how_to_install_it(launched, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(ui_cli.importlib.util, "find_spec",
                        lambda name, *a: None if name == "streamlit" else real(name, *a))
    result, argv = launched()
    assert result.exit_code == 2
    assert argv is None
    assert "pip install 'perfcast[ui]'" in result.output
