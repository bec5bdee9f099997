"""A lean discrete-event kernel: a heap of (time_s, priority, seq, payload) with no domain
knowledge. `seq` comes from a per-queue counter, so equal-time, equal-priority events pop in
the order they were pushed and two simulations in one process never share state."""

from __future__ import annotations

import heapq
from typing import Any

__all__ = ["EventQueue"]


class EventQueue:
    """Pending events ordered by time, then priority (lower first), then insertion order.
    Popping advances `now_s`; an event scheduled in the past is a bug and is refused."""

    __slots__ = ("_heap", "_seq", "now_s")

    def __init__(self, start_s: float = 0.0):
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        self.now_s = start_s

    def push(self, time_s: float, priority: int, payload: Any) -> None:
        assert time_s >= self.now_s, f"event at {time_s} s is before now ({self.now_s} s)"
        self._seq += 1
        heapq.heappush(self._heap, (time_s, priority, self._seq, payload))

    def pop(self) -> tuple[float, int, Any]:
        """The next event as (time_s, priority, payload); time never goes backwards."""
        time_s, priority, _, payload = heapq.heappop(self._heap)
        assert time_s >= self.now_s, "time went backwards"
        self.now_s = time_s
        return time_s, priority, payload

    def peek_time_s(self) -> float:
        """Time of the next event, or +inf when none is pending."""
        return self._heap[0][0] if self._heap else float("inf")

    def __len__(self) -> int:
        return len(self._heap)
