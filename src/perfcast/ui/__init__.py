"""The web UI (`perfcast ui`): a Streamlit page over the same commands the CLI runs.

`app.py` is the page (run by Streamlit); the logic lives in plain modules so it is tested
without a browser: `_forms` (widget values -> options, command line, scenario YAML),
`_views` (payload -> metrics, tables, chart data), `_runner` (running the commands).
Importing this package does not import Streamlit.
"""

from __future__ import annotations

from pathlib import Path as _Path

from perfcast.ui._forms import (
    MAX_SWEEP_POINTS,
    TASKS,
    build_options,
    cli_line,
    flatten_scenario,
    parse_values,
    scenario,
    scenario_yaml,
    sweep_points,
)
from perfcast.ui._runner import Forecast, forecast, run_grid
from perfcast.ui._views import (
    breakdown_frame,
    cdf_frame,
    headline,
    latency_frame,
    memory_frame,
    sweep_frame,
)

__all__ = ["APP_PATH", "MAX_SWEEP_POINTS", "TASKS", "Forecast", "breakdown_frame",
           "build_options", "cdf_frame", "cli_line", "flatten_scenario", "forecast",
           "headline", "latency_frame", "memory_frame", "parse_values", "run_grid",
           "scenario", "scenario_yaml", "sweep_frame", "sweep_points"]

# The Streamlit script `perfcast ui` runs.
APP_PATH = _Path(__file__).with_name("app.py")
