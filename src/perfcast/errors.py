"""The one exception type users see: a bad input, named by field, with what is allowed."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from pathlib import Path

__all__ = ["MAX_USER_FILE_BYTES", "InputError", "close_matches", "from_validation_error",
           "parse_user_yaml", "read_user_json", "read_user_text", "read_user_yaml"]

# Config files a user hands perfcast (model configs, calibrations, scenarios, price tables)
# are kilobytes; anything this large is the wrong file, refused before it is parsed.
MAX_USER_FILE_BYTES = 16 * 2**20


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


def read_user_text(path: str | Path, field: str, expected: str,
                   max_bytes: int = MAX_USER_FILE_BYTES) -> str:
    """A user's file as text: missing, oversized, unreadable or non-UTF-8 files become an
    InputError naming `field` (and what was `expected`) before anything parses them."""
    path = Path(path)
    if not path.is_file():
        raise InputError(field, f"no file at {path}", expected)
    size = path.stat().st_size
    if size > max_bytes:
        raise InputError(field, f"{path} is {size:,} bytes, over the {max_bytes:,}-byte limit",
                         expected)
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(field, f"cannot read {path}: {exc}", expected) from None


def read_user_json(path: str | Path, field: str, expected: str,
                   max_bytes: int = MAX_USER_FILE_BYTES) -> dict:
    """A user's JSON file that must hold one object (a mapping)."""
    text = read_user_text(path, field, expected, max_bytes)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(field, f"{path} is not valid JSON (line {exc.lineno}: {exc.msg})",
                         expected) from None
    if not isinstance(data, dict):
        raise InputError(field, f"{path} holds a JSON {type(data).__name__}, not an object",
                         expected)
    return data


def parse_user_yaml(text: str, field: str, origin: str) -> object:
    """YAML text through the safe loader only (no tags that build Python objects); a syntax
    error names the line."""
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise InputError(field, f"{origin}: not valid YAML{where}") from None


def read_user_yaml(path: str | Path, field: str, expected: str,
                   max_bytes: int = MAX_USER_FILE_BYTES) -> object:
    """A user's YAML file, size-checked, then safe-loaded."""
    return parse_user_yaml(read_user_text(path, field, expected, max_bytes), field, str(path))
