"""The one exception type users see: a bad input, named by field, with what is allowed."""

from __future__ import annotations

import difflib
import functools
import json
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["MAX_USER_FILE_BYTES", "AmbiguousName", "InputError", "check_output_file",
           "check_output_folder", "close_matches", "from_validation_error", "parse_user_json",
           "parse_user_yaml", "read_user_json", "read_user_text", "read_user_yaml", "writing"]

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

    def __reduce__(self):
        """Pickle by message and fields, not by __init__'s arguments (the default), so an
        error raised in a worker process (sweeps, the suite, capacity) reaches the parent."""
        return _restore_error, (type(self), self.args, dict(self.__dict__))


def _restore_error(cls: type, args: tuple, state: dict) -> InputError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class AmbiguousName(InputError):
    """A short name that fits several catalog entries (`a100`): refused listing them all."""

    def __init__(self, field: str, name: str, candidates: Iterable[str]):
        self.candidates = tuple(candidates)
        super().__init__(field, f"{name.strip()!r} is ambiguous: {', '.join(self.candidates)}"
                         " (give one of these full names)")


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
    if path.is_dir():
        raise InputError(field, f"{path} is a folder, not a file", expected)
    if not path.is_file():
        raise InputError(field, f"no file at {path}", expected)
    size = path.stat().st_size
    if size > max_bytes:
        raise InputError(field, f"{path} is {size:,} bytes, over the {max_bytes:,}-byte limit",
                         expected)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(field, f"cannot read {path}: not UTF-8 text (byte "
                         f"{exc.object[exc.start]:#04x} at offset {exc.start}: a binary file?)",
                         expected) from None
    except OSError as exc:
        raise InputError(field, f"cannot read {path}: {exc.strerror or exc}", expected) from None


def read_user_json(path: str | Path, field: str, expected: str,
                   max_bytes: int = MAX_USER_FILE_BYTES) -> dict:
    """A user's JSON file that must hold one object (a mapping)."""
    data = parse_user_json(read_user_text(path, field, expected, max_bytes), field, str(path),
                           expected)
    if not isinstance(data, dict):
        raise InputError(field, f"{path} holds a JSON {_json_kind(data)}, not an object",
                         expected)
    return data


def _json_kind(value: object) -> str:
    """The JSON name of a parsed value's type (array, string, ...), not Python's."""
    kinds = {list: "array", str: "string", bool: "boolean", int: "number", float: "number",
             type(None): "null", dict: "object"}
    return kinds.get(type(value), "value")


class _DuplicateKey(ValueError):
    def __init__(self, key: object):
        super().__init__(key)
        self.key = key


def _unique_pairs(pairs: list[tuple[str, object]]) -> dict:
    """json's object hook: an object naming a key twice is refused, not last-one-wins."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"\s*:?|[{}\[\]]')


def _json_duplicate_line(text: str, key: str) -> int | None:
    """The line of the second `key` in one JSON object (text already known to parse)."""
    seen: list[set | None] = []
    for token in _JSON_TOKEN.finditer(text):
        lexeme = token.group()
        if lexeme in "{[":
            seen.append(set() if lexeme == "{" else None)
        elif lexeme in "}]":
            seen.pop()
        elif lexeme.endswith(":") and seen and seen[-1] is not None:
            name = json.loads(lexeme[:-1].rstrip())
            if name == key and name in seen[-1]:
                return text.count("\n", 0, token.start()) + 1
            seen[-1].add(name)
    return None


def parse_user_json(text: str, field: str, origin: str, expected: str | None = None) -> object:
    """JSON text a user wrote: a syntax error or a key given twice in one object becomes an
    InputError naming the line (json's default silently keeps the last value)."""
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs)
    except json.JSONDecodeError as exc:
        raise InputError(field, f"{origin} is not valid JSON (line {exc.lineno}: {exc.msg})",
                         expected) from None
    except _DuplicateKey as exc:
        line = _json_duplicate_line(text, exc.key)
        where = f" (line {line})" if line else ""
        raise InputError(field, f"{origin}: key {exc.key!r} is given twice in one object"
                         f"{where}", "each key once") from None


@functools.cache
def _unique_key_loader():
    """yaml's safe loader, refusing a mapping that names a key twice (its default keeps the
    last value silently); merge keys (`<<`) still override as YAML defines."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen: set = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        if key in seen:
                            raise _DuplicateYamlKey(key, key_node.start_mark.line + 1)
                        seen.add(key)
                    except TypeError:  # an unhashable key: the base loader says so
                        pass
            return super().construct_mapping(node, deep)

    return UniqueKeyLoader


class _DuplicateYamlKey(ValueError):
    def __init__(self, key: object, line: int):
        super().__init__(key, line)
        self.key, self.line = key, line


def parse_user_yaml(text: str, field: str, origin: str) -> object:
    """YAML text through the safe loader only (no tags that build Python objects); a syntax
    error names the line, and so does a key given twice in one mapping."""
    import yaml

    try:
        return yaml.load(text, Loader=_unique_key_loader())  # noqa: S506 (a SafeLoader)
    except _DuplicateYamlKey as exc:
        raise InputError(field, f"{origin}: key {exc.key!r} is given twice in one mapping "
                         f"(line {exc.line})", "each key once") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise InputError(field, f"{origin}: not valid YAML{where}") from None


def read_user_yaml(path: str | Path, field: str, expected: str,
                   max_bytes: int = MAX_USER_FILE_BYTES) -> object:
    """A user's YAML file, size-checked, then safe-loaded."""
    return parse_user_yaml(read_user_text(path, field, expected, max_bytes), field, str(path))


def _writable_folder(folder: Path, field: str, what: str) -> None:
    """`folder` exists, is a folder and this process may create files in it."""
    if not folder.exists():
        raise InputError(field, f"folder {folder} of {what} does not exist",
                         "a path in an existing folder")
    if not folder.is_dir():
        raise InputError(field, f"{folder} (in {what}) is a file, not a folder",
                         "a path in an existing folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(field, f"folder {folder} is not writable", "a writable folder")


def check_output_file(path: str | Path | None, field: str, force: bool | None = None
                      ) -> Path | None:
    """A file perfcast is about to write, checked before any work: not a folder, in an
    existing writable folder, and new. perfcast never overwrites a file, except where a
    command has a --force switch (`force` False: not given, True: given; None: none)."""
    if path is None:
        return None
    path = Path(path)
    if path.is_dir():
        raise InputError(field, f"{path} is a folder", "a new file path")
    if path.exists() and not force:
        if force is None:
            raise InputError(field, f"{path} exists; perfcast never overwrites a file",
                             "a new path")
        raise InputError(field, f"{path} exists; pass --force to overwrite it",
                         "a new path, or --force")
    _writable_folder(path.parent, field, str(path))
    return path


def check_output_folder(path: str | Path | None, field: str) -> Path | None:
    """A folder perfcast writes files into (created with its parents if missing): not a
    file, and its nearest existing ancestor a writable folder."""
    if path is None:
        return None
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(field, f"{path} exists and is not a folder", "a folder path")
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    _writable_folder(existing, field, str(path))
    return path


@contextmanager
def writing(path: str | Path, field: str) -> Iterator[Path]:
    """Around a write: an OSError (disk full, permissions changed, a folder removed since
    the check) becomes an InputError naming the option, not a traceback."""
    try:
        yield Path(path)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise InputError(field, f"cannot write {path}: {reason}", "a writable path") from None
