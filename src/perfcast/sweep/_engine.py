"""Run a sweep: every point through a point function, results resumable and in Parquet.

The engine knows nothing of commands: `point_fn(point) -> payload dict` is given to it (the
CLI passes one that runs the point's request through `perfcast.api.run`), which keeps this
layer below the CLI and lets tests drive it with a plain function.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from perfcast.api._backends import imap_unordered
from perfcast.errors import InputError, check_output_folder
from perfcast.progress import ProgressFn
from perfcast.sweep._grid import point_key
from perfcast.sweep._store import read_parts, write_part, write_results
from perfcast.sweep._table import point_row

__all__ = ["evaluate_point", "run_sweep"]

PointFn = Callable[[dict[str, Any]], Mapping[str, Any]]
FLUSH_S = 30.0  # a part is written at least this often while points finish


def evaluate_point(point_fn: PointFn, point: Mapping[str, Any]) -> dict[str, Any]:
    """A point's result record. A point that fails (bad input, or any error of the model)
    is recorded as status "error" with its message: one bad point never stops a sweep."""
    key = point_key(point)
    try:
        payload = point_fn(dict(point))
    except InputError as exc:
        return point_row(key, point, None, str(exc))
    except Exception as exc:  # noqa: BLE001 - recorded per point, the sweep goes on
        return point_row(key, point, None, f"{type(exc).__name__}: {exc}")
    if not isinstance(payload, Mapping):
        return point_row(key, point, None, f"point function returned {type(payload).__name__}"
                         ", not a mapping")
    return point_row(key, point, payload, None)


def _chunk_points(todo: int) -> int:
    """Points per part file: about 20 parts per sweep, 1 to 64 points each."""
    return max(1, min(64, todo // 20))


def run_sweep(points: Iterable[Mapping[str, Any]], point_fn: PointFn, out_dir: str | Path,
              backend: str = "local", workers: int | None = None,
              progress: ProgressFn | None = None,
              chunk_points: int | None = None) -> pd.DataFrame:
    """Evaluate every point not already finished in `out_dir`, and return all the results.

    Finished points go to `out_dir/parts/` in chunks as they complete (each file written
    atomically), so a rerun after an interruption computes only what is missing; then all
    points are written, in the order given, to `out_dir/results.parquet` and returned as a
    DataFrame (`attrs`: computed, reused, path). Duplicate points are evaluated once.
    `progress(done, total)` is called as each point finishes (reused points count as done);
    None reports nothing (the CLI passes its bar; the engine draws nothing itself).
    """
    out_dir = check_output_folder(out_dir, "out")
    unique = {point_key(point): dict(point) for point in points}
    done = read_parts(out_dir)
    todo = [point for key, point in unique.items() if key not in done]
    chunk = chunk_points or _chunk_points(len(todo))
    buffer: list[dict[str, Any]] = []
    last_flush = time.monotonic()
    finished = len(unique) - len(todo)  # reused points count as finished
    try:
        results = imap_unordered(partial(evaluate_point, point_fn), todo, backend, workers)
        with closing(results):
            for row in results:
                buffer.append(row)
                done[row["key"]] = row
                finished += 1
                if progress is not None:
                    progress(finished, len(unique))
                if len(buffer) >= chunk or time.monotonic() - last_flush > FLUSH_S:
                    write_part(out_dir, buffer)
                    buffer, last_flush = [], time.monotonic()
    finally:
        if buffer:  # the finished points of an interrupted run are kept
            write_part(out_dir, buffer)
    path = write_results(out_dir, [done[key] for key in unique])
    frame = pq.read_table(path).to_pandas()
    frame.attrs.update(computed=len(todo), reused=len(unique) - len(todo), path=str(path))
    return frame
