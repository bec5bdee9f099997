"""Design-space sweeps: grids of command options run locally (process pool) or on Ray, with
resumable Parquet results; and capacity search, the cheapest deployment meeting latency SLOs.

The point function (what one point computes) is an argument: the CLI gives one that runs a
`perfcast` command, so this layer never imports the CLI above it.
"""

from perfcast.sweep._backends import BACKENDS, choose_backend
from perfcast.sweep._capacity import (
    Slo,
    bisect_max,
    capacity_search,
    qps_ladder,
    search_candidate,
)
from perfcast.sweep._engine import evaluate_point, run_sweep
from perfcast.sweep._grid import expand_grid, parse_assignment, parse_scalar, point_key
from perfcast.sweep._prices import gpu_prices, parse_prices
from perfcast.sweep._store import PARTS_DIR, RESULTS_FILE
from perfcast.sweep._table import flatten_payload

__all__ = [
    "BACKENDS", "PARTS_DIR", "RESULTS_FILE", "Slo", "bisect_max", "capacity_search",
    "choose_backend", "evaluate_point", "expand_grid", "flatten_payload", "gpu_prices",
    "parse_assignment", "parse_prices", "parse_scalar", "point_key",
    "qps_ladder", "run_sweep", "search_candidate",
]
