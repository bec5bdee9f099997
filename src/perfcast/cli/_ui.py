"""`perfcast ui`: start the web UI (a Streamlit server) on this machine.

It binds to 127.0.0.1 unless `--host` says otherwise: the page runs forecasts on request,
so exposing it to a network is a decision the user makes, and is warned about.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Annotated

import typer

from perfcast.cli._common import guarded
from perfcast.errors import InputError

__all__ = ["is_loopback", "streamlit_argv", "ui"]

LOOPBACK = "127.0.0.1"


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a hostname: it may resolve to anything


def _app_path() -> Path:
    spec = importlib.util.find_spec("perfcast.ui")
    return Path(spec.origin).with_name("app.py")


def streamlit_argv(host: str = LOOPBACK, port: int = 8501, headless: bool = True) -> list[str]:
    """The command that serves the page: `streamlit run app.py` with address, port, no
    usage statistics, no deploy menu, and no browser opened when headless."""
    if not 1 <= port <= 65535:
        raise InputError("port", f"{port} is not a TCP port", "1-65535")
    if not host:
        raise InputError("host", "is empty", f"an address, e.g. {LOOPBACK}")
    return [sys.executable, "-m", "streamlit", "run", str(_app_path()),
            "--server.address", host, "--server.port", str(port),
            "--server.headless", "true" if headless else "false",
            "--browser.gatherUsageStats", "false", "--client.toolbarMode", "minimal"]


@guarded
def ui(
    host: Annotated[str, typer.Option(help="Address to bind; anything but loopback exposes "
                                           "the page to your network.")] = LOOPBACK,
    port: Annotated[int, typer.Option(help="TCP port.")] = 8501,
    headless: Annotated[bool, typer.Option("--headless/--no-headless",
                                           help="Do not open a browser window.")] = True,
) -> None:
    """Start the web UI: choose model, hardware, plan and workload; see the forecast."""
    if importlib.util.find_spec("streamlit") is None:
        raise InputError("ui", "needs Streamlit, which is not installed",
                         "pip install 'perfcast[ui]'")
    argv = streamlit_argv(host, port, headless)
    if not is_loopback(host):
        typer.echo(f"warning: binding to {host}: anyone who can reach this machine on port "
                   f"{port} can use the page (default: {LOOPBACK})", err=True)
    typer.echo(f"perfcast UI at http://{host}:{port} (Ctrl+C stops it)", err=True)
    raise typer.Exit(code=_serve(argv))


def _serve(argv: list[str]) -> int:
    """Run the server until it exits; Ctrl+C or SIGTERM stop it too, so no server is left
    behind when `perfcast ui` itself is stopped."""
    process = subprocess.Popen(argv)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, lambda *_: process.terminate()) if main else None
    try:
        return process.wait()
    except KeyboardInterrupt:
        process.terminate()
        try:
            return process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
