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

from perfcast.api._assign import parse_assignment, parse_scalar
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
