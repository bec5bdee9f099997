"""Running forecasts for the page: each form is a request answered by `perfcast.api.run`,
the path the CLI and the suite take, so the page shows exactly the numbers
`perfcast <command> ... --json` prints."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from perfcast.api import Result, ServeResult, run_options
from perfcast.errors import InputError

__all__ = ["Forecast", "forecast", "run_grid"]

Run = Callable[[str, Mapping[str, Any]], Result]


@dataclass(frozen=True)
class Forecast:
    """A command's JSON payload and, for `serve`, its per-request table (for the CDFs)."""

    command: str
    options: dict[str, Any]
    payload: dict[str, Any]
    requests: pd.DataFrame | None = None


def forecast(command: str, options: Mapping[str, Any], run: Run = run_options) -> Forecast:
    """Run one command: its payload and, for `serve`, its per-request table (the CDFs)."""
    result = run(command, options)
    requests = result.requests if isinstance(result, ServeResult) else None
    return Forecast(command, dict(options), result.payload(), requests)


def run_grid(command: str, points: Sequence[Mapping[str, Any]], run: Run = run_options,
             progress: Callable[[int, int], Any] | None = None
             ) -> list[tuple[dict[str, Any], dict | None, str | None]]:
    """Each point's (options, payload, None), or (options, None, message) when the command
    refuses that point (a plan that does not fit, say): one bad point does not end a sweep.
    `progress(done, total)` is called after each point."""
    results = []
    for done, options in enumerate(points, start=1):
        try:
            results.append((dict(options), run(command, options).payload(), None))
        except InputError as exc:
            results.append((dict(options), None, str(exc)))
        if progress is not None:
            progress(done, len(points))
    return results
