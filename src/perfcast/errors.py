"""The one exception type users see: a bad input, named by field, with what is allowed."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["InputError", "close_matches", "from_validation_error"]


class InputError(ValueError):
    """An input perfcast cannot accept. The CLI prints it as one line and exits with code 2."""

    def __init__(self, field: str, problem: str, allowed: Iterable[str] | str | None = None):
        self.field = field
        self.problem = problem
        if allowed is not None and not isinstance(allowed, str):
            allowed = ", ".join(str(a) for a in allowed)
        self.allowed = allowed
        message = f"{field}: {problem}"
        if allowed:
            message += f" (allowed: {allowed})"
        super().__init__(message)


def close_matches(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Catalog names closest to a misspelt one, best first (case-insensitive)."""
    by_lower: dict[str, str] = {}
    for choice in choices:
        by_lower.setdefault(choice.lower(), choice)
    hits = difflib.get_close_matches(name.lower(), list(by_lower), n=n, cutoff=0.4)
    if not hits:
        hits = [c for c in by_lower if name.lower() in c or c in name.lower()][:n]
    return [by_lower[h] for h in hits]


def from_validation_error(exc, prefix: str = "", default: str = "input", origin: str = ""
                          ) -> InputError:
    """The first error of a pydantic ValidationError as an InputError naming its field
    (`prefix` + the error's location, `default` when it has none); `origin` (a file) leads
    the message."""
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or default
    msg = err["msg"].removeprefix("Value error, ")
    return InputError(f"{prefix}{field}", f"{origin}: {msg}" if origin else msg)
