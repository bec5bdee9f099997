"""The `--debug` switch: whether the error boundary lets an unexpected exception (and its
traceback) through. Its own module, importing nothing, so that the top-level command group
sets it without importing the boundary's module (`cli._common`, which imports perfcast.api)."""

from __future__ import annotations

__all__ = ["debug_enabled", "set_debug"]

_DEBUG = {"on": False}  # set once per invocation by the global --debug flag


def set_debug(on: bool) -> None:
    """--debug: let unexpected exceptions (and their tracebacks) through the boundary."""
    _DEBUG["on"] = bool(on)


def debug_enabled() -> bool:
    return _DEBUG["on"]
