"""perfcast's on-disk cache directory (standard library only: the CLI's start-up reads it
before importing anything else).

`$PERFCAST_CACHE_DIR`, else `$XDG_CACHE_HOME/perfcast`, else `~/.cache/perfcast`;
`PERFCAST_CACHE_DIR=` (empty) turns every cached copy off. What lives there is derived data
(compact copies of shipped JSON, the rendered top-level help), each named by a hash of what
it was derived from, so deleting the directory is always safe.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["cache_dir", "write_atomically"]


def cache_dir() -> Path | None:
    """Where the cached copies live (module docstring); None when turned off."""
    if "PERFCAST_CACHE_DIR" in os.environ:
        value = os.environ["PERFCAST_CACHE_DIR"]
        return Path(value) if value else None
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "perfcast"


def write_atomically(path: Path, write: Callable[[BinaryIO], object]) -> bool:
    """Write `path` (and its folder) through a temporary file beside it renamed into place,
    so a reader sees the whole file or none; False where it cannot be written (a read-only
    home, a full disk), leaving nothing behind."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
        with os.fdopen(fd, "wb") as out:
            write(out)
        os.replace(tmp, path)
        tmp = None
        return True
    except OSError:
        return False
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
