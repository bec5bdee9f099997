"""Sweep points: a base of options times a grid of values, each point named by a stable key.

A point is a flat mapping of option names to JSON values. Its key is a hash of its sorted
JSON, so the same point gets the same key in every run, on every machine: that is what lets
an interrupted sweep skip the points it already finished.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from perfcast.errors import InputError

__all__ = ["expand_grid", "parse_assignment", "parse_scalar", "point_key"]

KEY_HEX_CHARS = 16  # 64 bits: a collision among a million points has odds ~3e-8


def point_key(point: Mapping[str, Any]) -> str:
    """A stable hex key of a point: sha256 of its JSON with sorted keys, first 16 chars."""
    text = json.dumps(dict(point), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_HEX_CHARS]


def expand_grid(base_options: Mapping[str, Any],
                grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values over the base (a grid value replaces the base's).

    Cartesian product in the grid's key order, the last key varying fastest; an empty grid
    gives the base alone. The order is part of the contract: results come back in it.
    """
    for name, values in grid.items():
        if isinstance(values, str | bytes) or not isinstance(values, Sequence):
            raise InputError(f"grid.{name}", f"expected a list of values, got {values!r}",
                             "a non-empty list")
        if not values:
            raise InputError(f"grid.{name}", "no values", "a non-empty list")
    names = list(grid)
    return [{**base_options, **dict(zip(names, combo, strict=True))}
            for combo in itertools.product(*(grid[n] for n in names))]


def parse_scalar(text: str) -> Any:
    """A command-line value as the JSON scalar it spells: int, float, bool, null or string."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "none"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text.strip()


def parse_assignment(text: str, field: str, many: bool) -> tuple[str, Any]:
    """`name=value` (one value) or, with `many`, `name=v1,v2,...` (';' splits instead when
    the values themselves hold commas, e.g. `prompt_tokens=128,2048;256,4096`)."""
    name, sep, value = text.partition("=")
    name = name.strip().replace("-", "_")
    if not sep or not name:
        raise InputError(field, f"expected NAME=VALUE, got {text!r}",
                         "NAME=V1,V2,... " if many else "NAME=VALUE")
    if not many:
        return name, parse_scalar(value)
    parts = value.split(";") if ";" in value else value.split(",")
    values = [parse_scalar(p) for p in parts if p.strip()]
    if not values:
        raise InputError(field, f"no values for {name!r} in {text!r}", "NAME=V1,V2,...")
    return name, values
