"""Design-space sweeps: grids of command options run locally (process pool) or on Ray, with
resumable Parquet results; and, from `perfcast.api`, capacity search (the cheapest
deployment meeting latency SLOs) with its backends and GPU prices.

The point function (what one point computes) is an argument, so the engine knows nothing of
commands; the one `perfcast sweep` gives it (`_point.run_point`) runs a point's request
through `perfcast.api.run`.
"""

from perfcast.api._backends import BACKENDS, choose_backend
from perfcast.api._capacity_search import (
    Slo,
    bisect_max,
    capacity_search,
    qps_ladder,
    search_candidate,
)
from perfcast.api._prices import gpu_prices, parse_prices
from perfcast.sweep._engine import evaluate_point, run_sweep
from perfcast.sweep._grid import expand_grid, parse_assignment, parse_scalar, point_key
from perfcast.sweep._store import PARTS_DIR, RESULTS_FILE
from perfcast.sweep._table import flatten_payload

__all__ = [
    "BACKENDS", "PARTS_DIR", "RESULTS_FILE", "Slo", "bisect_max", "capacity_search",
    "choose_backend", "evaluate_point", "expand_grid", "flatten_payload", "gpu_prices",
    "parse_assignment", "parse_prices", "parse_scalar", "point_key",
    "qps_ladder", "run_sweep", "search_candidate",
]
