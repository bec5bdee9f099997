"""Design-space sweeps: grids of command options run locally (process pool) or on Ray, with
resumable Parquet results; and, from `perfcast.api`, capacity search (the cheapest
deployment meeting latency SLOs) with its backends and GPU prices.

The point function (what one point computes) is an argument, so the engine knows nothing of
commands; the one `perfcast sweep` gives it (`_point.run_point`) runs a point's request
through `perfcast.api.run`.
"""

from perfcast import _lazy_exports

# Module -> the public names it provides, each imported on first use (PEP 562): `sweep
# --help` and the point function load none of the engine (pandas, pyarrow, the capacity
# search).
_EXPORTS = {
    "perfcast.api._backends": ("BACKENDS", "choose_backend"),
    "perfcast.api._capacity_search": ("Slo", "bisect_max", "capacity_search", "qps_ladder",
        "search_candidate"),
    "perfcast.api._prices": ("gpu_prices", "parse_prices"),
    "_engine": ("evaluate_point", "run_sweep"),
    "_grid": ("expand_grid", "parse_assignment", "parse_scalar", "point_key"),
    "_store": ("PARTS_DIR", "RESULTS_FILE"),
    "_table": ("flatten_payload",),
}
__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)

__all__ = [name for names in _EXPORTS.values() for name in names]  # pinned: tests
