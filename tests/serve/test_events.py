import pytest

from perfcast.serve._events import EventQueue


def test_events_pop_by_time_then_priority_then_insertion():
    q = EventQueue()
    for time_s, prio, name in [(2.0, 0, "c"), (1.0, 2, "b2"), (1.0, 1, "a"), (1.0, 2, "b3")]:
        q.push(time_s, prio, name)
    assert [q.pop()[2] for _ in range(4)] == ["a", "b2", "b3", "c"]
    assert q.now_s == 2.0 and len(q) == 0 and q.peek_time_s() == float("inf")


def test_time_never_goes_backwards():
    q = EventQueue()
    q.push(1.0, 0, None)
    q.pop()
    with pytest.raises(AssertionError):
        q.push(0.5, 0, None)


def test_queues_are_independent():
    a, b = EventQueue(), EventQueue()
    a.push(1.0, 0, "x")
    assert len(b) == 0 and a._seq == 1 and b._seq == 0
