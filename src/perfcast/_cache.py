"""perfcast's on-disk cache directory (standard library only: the CLI's start-up reads it
before importing anything else).

`$PERFCAST_CACHE_DIR`, else `$XDG_CACHE_HOME/perfcast`, else `~/.cache/perfcast`;
`PERFCAST_CACHE_DIR=` (empty) turns every cached copy off. What lives there is derived data
(compact copies of shipped JSON, the rendered top-level help), each named by a hash of what
it was derived from, so deleting the directory is always safe.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir() -> Path | None:
    """Where the cached copies live (module docstring); None when turned off."""
    if "PERFCAST_CACHE_DIR" in os.environ:
        value = os.environ["PERFCAST_CACHE_DIR"]
        return Path(value) if value else None
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "perfcast"
