"""Progress of long work, reported from deep inside it: one channel for every layer.

A face (the CLI's bar, the UI's) asks for reports with `reporting(progress)` (or
`perfcast.api.run(request, progress=...)`, which does it); code that runs long (the serving
engine, the training-plan search, the measurement sweep, the capacity search) calls
`current()` and, when it is not None, `progress(done, total)` as it goes. No layer between
them passes a callback along, and none knows how progress is shown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["ProgressFn", "claimed", "current", "offset", "reporting"]

ProgressFn = Callable[[int, int], None]  # progress(done, total)

_CURRENT: ContextVar[ProgressFn | None] = ContextVar("perfcast_progress", default=None)


@contextmanager
def reporting(progress: ProgressFn | None) -> Iterator[None]:
    """Within the block, long work reports to `progress` (None: no reports)."""
    token = _CURRENT.set(progress)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current() -> ProgressFn | None:
    """Where long work running now reports, or None."""
    return _CURRENT.get()


@contextmanager
def claimed() -> Iterator[ProgressFn | None]:
    """The current callback, for the caller alone: work nested inside reports nothing (a
    capacity search's serve probes must not move the bar that counts its candidates)."""
    progress = current()
    with reporting(None):
        yield progress


def offset(progress: ProgressFn | None, before: int, total: int) -> ProgressFn | None:
    """One part's `progress(done, n)` as the whole's: `before` units already done of `total`
    (None stays None: nothing to report)."""
    if progress is None:
        return None
    return lambda done, _n: progress(before + done, total)
