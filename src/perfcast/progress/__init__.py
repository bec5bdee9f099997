"""Progress of long work, reported from deep inside it: one channel for every layer
(`reporting` to ask for reports, `current`/`claimed` where the work runs)."""

from perfcast.progress._channel import ProgressFn, claimed, current, offset, reporting

__all__ = ["ProgressFn", "claimed", "current", "offset", "reporting"]
