"""A sweep's directory: finished points in `parts/*.parquet`, all of them in `results.parquet`.

Every file is written to a temporary name in the same folder, flushed to disk, then renamed
over its final name (`os.replace`, atomic on POSIX and Windows): a sweep killed at any moment
leaves whole files or none, and the parts already written are exactly the points finished.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from perfcast.errors import InputError, writing
from perfcast.sweep._grid import point_key
from perfcast.sweep._table import rows_to_table

__all__ = ["PARTS_DIR", "RESULTS_FILE", "read_parts", "write_part", "write_results"]

PARTS_DIR = "parts"
RESULTS_FILE = "results.parquet"
_TMP_PREFIX = ".tmp-"


def _write_atomic(table: pa.Table, path: Path) -> Path:
    tmp = path.with_name(f"{_TMP_PREFIX}{os.getpid()}-{path.name}")
    with writing(path, "out"), open(tmp, "wb") as handle:
        pq.write_table(table, handle)
        handle.flush()
        os.fsync(handle.fileno())
    with writing(path, "out"):
        os.replace(tmp, path)
    return path


def _part_files(out_dir: Path) -> list[Path]:
    folder = out_dir / PARTS_DIR
    return sorted(folder.glob("part-*.parquet")) if folder.is_dir() else []


def write_part(out_dir: Path, rows: list[Mapping[str, Any]]) -> Path:
    """One chunk of finished points as `parts/part-<hash of its keys>.parquet`."""
    folder = out_dir / PARTS_DIR
    with writing(folder, "out"):
        folder.mkdir(parents=True, exist_ok=True)
    name = f"part-{point_key({'keys': [row['key'] for row in rows]})}.parquet"
    return _write_atomic(rows_to_table(rows), folder / name)


def read_parts(out_dir: Path) -> dict[str, dict[str, Any]]:
    """Every finished point's record by key (leftover temporary files are removed)."""
    folder = out_dir / PARTS_DIR
    if folder.is_dir():
        for tmp in folder.glob(f"{_TMP_PREFIX}*"):
            tmp.unlink(missing_ok=True)
    rows: dict[str, dict[str, Any]] = {}
    for path in _part_files(out_dir):
        try:
            records = pq.read_table(path).to_pylist()
        except (OSError, pa.ArrowException) as exc:
            raise InputError("out", f"{path} is not a readable sweep part: {exc}",
                             "a sweep directory written by perfcast") from None
        for record in records:
            rows.setdefault(record["key"], record)
    return rows


def write_results(out_dir: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    """All the sweep's records, in point order, as `results.parquet`."""
    with writing(out_dir, "out"):
        out_dir.mkdir(parents=True, exist_ok=True)
    return _write_atomic(rows_to_table(rows), out_dir / RESULTS_FILE)
