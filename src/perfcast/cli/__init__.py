"""The `perfcast` command line: `main` is the entry point, `app` the typer app (built on
first use). `perfcast --help` is answered from its last rendering where one matches this
terminal and environment (`cli._help_cache`), before typer is imported."""

from __future__ import annotations

import sys

from perfcast import _lazy_exports
from perfcast.cli import _help_cache

__all__ = ["app", "main"]

__getattr__, __dir__ = _lazy_exports(__name__, {"_app": ("app",)})


def main() -> None:
    stored = _help_cache.stored(tuple(sys.argv[1:]))  # None unless `perfcast --help`
    if _help_cache.replay(stored):
        return
    from perfcast.cli._app import app

    with _help_cache.recording(stored):
        app()
