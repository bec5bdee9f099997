"""Running forecasts for the page: the same in-process `run_command` the suite uses, so
the page shows exactly the numbers `perfcast <command> ... --json` prints."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from perfcast.cli._exec import run_command
from perfcast.errors import InputError

__all__ = ["Forecast", "forecast", "run_grid"]

Run = Callable[[str, Mapping[str, Any]], dict]


@dataclass(frozen=True)
class Forecast:
    """A command's JSON payload and, for `serve`, its per-request table (for the CDFs)."""

    command: str
    options: dict[str, Any]
    payload: dict[str, Any]
    requests: pd.DataFrame | None = None


def forecast(command: str, options: Mapping[str, Any], run: Run = run_command) -> Forecast:
    """Run one command. `serve` also writes its per-request table (`--out`) to a scratch
    file, read back here: the JSON summary carries percentiles only."""
    if command != "serve" or "out" in options:
        return Forecast(command, dict(options), run(command, options))
    with tempfile.TemporaryDirectory(prefix="perfcast-ui-") as tmp:
        table = Path(tmp) / "requests.csv"
        payload = run(command, {**options, "out": str(table)})
        requests = pd.read_csv(table) if table.is_file() else None
    return Forecast(command, dict(options), payload, requests)


def run_grid(command: str, points: Sequence[Mapping[str, Any]], run: Run = run_command,
             progress: Callable[[int, int], Any] | None = None
             ) -> list[tuple[dict[str, Any], dict | None, str | None]]:
    """Each point's (options, payload, None), or (options, None, message) when the command
    refuses that point (a plan that does not fit, say): one bad point does not end a sweep.
    `progress(done, total)` is called after each point."""
    results = []
    for done, options in enumerate(points, start=1):
        try:
            results.append((dict(options), run(command, options), None))
        except InputError as exc:
            results.append((dict(options), None, str(exc)))
        if progress is not None:
            progress(done, len(points))
    return results
