"""Options written as text, `NAME=VALUE`: `--set`/`--grid` on the command line (sweep,
capacity), each value read as the JSON scalar it spells."""

from __future__ import annotations

from typing import Any

from perfcast.errors import InputError

__all__ = ["parse_assignment", "parse_scalar"]


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
