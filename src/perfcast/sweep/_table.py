"""Result rows: a point and its payload as one flat record, and records as one Arrow table.

Columns: `key`, `status` (ok/error), `error` (the message of a failed point), `in.<option>`
for each input and `out.<dotted.path>` for each number or string of the payload. Lists (and
any non-scalar) become JSON strings, so every cell is a scalar Parquet and DuckDB can type.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

__all__ = ["LEAD_COLUMNS", "flatten_payload", "point_row", "rows_to_table"]

LEAD_COLUMNS = ("key", "status", "error")


def _cell(value: Any) -> Any:
    """A scalar as itself; a list or other structure as its JSON text."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def flatten_payload(payload: Mapping[str, Any], prefix: str = "out.") -> dict[str, Any]:
    """Nested dicts to dotted columns: {"ttft_s": {"p99": x}} -> {"out.ttft_s.p99": x}."""
    flat: dict[str, Any] = {}
    for name, value in payload.items():
        if isinstance(value, Mapping) and value:
            flat.update(flatten_payload(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = _cell(value)
    return flat


def point_row(key: str, point: Mapping[str, Any], payload: Mapping[str, Any] | None,
              error: str | None) -> dict[str, Any]:
    """One result record: a finished point (payload) or a failed one (error)."""
    row = {"key": key, "status": "ok" if error is None else "error", "error": error}
    row.update({f"in.{name}": _cell(value) for name, value in point.items()})
    if payload is not None:
        row.update(flatten_payload(payload))
    return row


def _column(values: list[Any]) -> pa.Array:
    """An Arrow column; values of mixed kinds (int and str, say) become strings."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())


def rows_to_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Records to a table: lead columns, then in.* and out.* columns each sorted by name.

    Sorted names make the schema a function of the set of columns only, so a sweep that
    was interrupted and resumed writes the same table as one that ran straight through.
    """
    rows = list(rows)
    names = {name for row in rows for name in row}
    rest = sorted(names - set(LEAD_COLUMNS), key=lambda n: (not n.startswith("in."), n))
    columns = [*LEAD_COLUMNS, *rest]
    arrays = [_column([row.get(name) for row in rows]) for name in columns]
    return pa.Table.from_arrays(arrays, names=columns)
