"""GPU prices per hour: the shipped list-price table, overridden entry by entry by a user file.

A price file is JSON: `{"prices": {"<catalog gpu>": {"usd_per_gpu_hour": 2.5, "source": "...",
"as_of": "2025-01"}}}` (the top-level `prices` wrapper may be left out). Names resolve through
the hardware catalog (aliases too), so a typo fails here, naming the entry.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from perfcast.errors import InputError, read_user_json
from perfcast.specs import get_device

__all__ = ["PRICE_FILE_BYTES", "gpu_prices", "parse_prices"]

PRICE_FILE_BYTES = 1_000_000  # a price table is a few KB; refuse anything absurd


def _gpu(name: str, field: str) -> str:
    """The catalog name of a price entry's GPU; the catalog's refusal (an unknown name with
    its close matches, an ambiguous one with its candidates) names the entry."""
    try:
        return get_device(name).name
    except InputError as exc:
        raise InputError(field, exc.problem, exc.allowed) from None


def parse_prices(data: Any, origin: str = "prices", source: str = "user price file"
                 ) -> dict[str, dict[str, Any]]:
    """Validated entries by canonical GPU name: usd_per_gpu_hour (> 0), source (default
    `source`), as_of. Errors name the entry as `<origin>.<gpu>[.<field>]`."""
    if isinstance(data, dict) and isinstance(data.get("prices"), dict):
        data = data["prices"]
    if not isinstance(data, dict):
        raise InputError(origin, "expected an object of GPU name -> price entry",
                         '{"h100-sxm": {"usd_per_gpu_hour": 2.5}}')
    prices = {}
    for name, entry in data.items():
        field = f"{origin}.{name}"
        gpu = _gpu(str(name), field)
        if not isinstance(entry, dict):
            raise InputError(field, f"expected an object, got {entry!r}",
                             '{"usd_per_gpu_hour": 2.5, "source": "...", "as_of": "..."}')
        price = entry.get("usd_per_gpu_hour")
        if isinstance(price, bool) or not isinstance(price, int | float) or not price > 0:
            raise InputError(f"{field}.usd_per_gpu_hour", f"{price!r} is not a price",
                             "a number > 0 (US dollars per GPU-hour)")
        extra = set(entry) - {"usd_per_gpu_hour", "source", "as_of"}
        if extra:
            raise InputError(f"{field}.{sorted(extra)[0]}", "unknown field",
                             ["usd_per_gpu_hour", "source", "as_of"])
        prices[gpu] = {"usd_per_gpu_hour": float(price),
                       "source": str(entry.get("source", source)),
                       "as_of": str(entry.get("as_of", "unknown"))}
    return prices


def gpu_prices(path: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """The shipped list prices, with the entries of the file at `path` replacing them."""
    shipped = json.loads(resources.files("perfcast.api").joinpath(
        "data/gpu_prices.json").read_text())
    prices = parse_prices(shipped["prices"], "gpu_prices.json")
    if path is None:
        return prices
    data = read_user_json(path, "prices", "a JSON price file", PRICE_FILE_BYTES)
    return {**prices, **parse_prices(data, source=str(path))}
