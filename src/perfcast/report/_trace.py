"""A training iteration as Chrome-trace / Perfetto JSON (open in https://ui.perfetto.dev):
per pipeline stage a compute track (one span per forward or backward micro-batch task, its
exposed inline communication in the span's args) and p2p receive tracks, then one track for
what follows the pipeline (exposed gradient reduction, optimizer step, parameter
all-gather). Spans on a track never overlap: receives that do are spread over extra lanes."""

from __future__ import annotations

import pandas as pd

from perfcast.report._schedule import TrainSchedule

__all__ = ["training_trace"]

_US = 1e6
_PID = 1


def _lanes(starts: list[float], ends: list[float]) -> list[int]:
    """Greedy interval partitioning (spans in start order): each span to the first lane
    free by its start, so no two spans of a lane overlap."""
    free_at: list[float] = []
    out = []
    for a, b in zip(starts, ends, strict=True):
        lane = next((i for i, t in enumerate(free_at) if t <= a), len(free_at))
        if lane == len(free_at):
            free_at.append(b)
        else:
            free_at[lane] = b
        out.append(lane)
    return out


def _task_name(row, chunks: int) -> str:
    name = f"{'B' if row.backward else 'F'}{row.micro_batch}"
    return name + (f" chunk {row.chunk}" if chunks > 1 else "")


def _spans(sched: TrainSchedule) -> tuple[list[dict], dict[int, str]]:
    """Spans {tid, name, cat, start_s, end_s, args} and the track names by tid."""
    spans, names, tid = [], {}, 0
    for stage in range(sched.stages):
        tid += 1
        names[tid] = f"stage {stage}: compute (forward/backward)"
        for row in sched.tasks[sched.tasks["stage"] == stage].itertuples(index=False):
            spans.append({"tid": tid, "name": _task_name(row, sched.chunks),
                          "cat": "backward" if row.backward else "forward",
                          "start_s": row.start_s, "end_s": row.end_s,
                          "args": {"micro_batch": int(row.micro_batch), "chunk": int(row.chunk),
                                   "compute_s": float(row.compute_s),
                                   "exposed_comm_s": float(row.exposed_comm_s)}})
        recv = sched.receives[sched.receives["stage"] == stage]
        lanes = _lanes(list(recv["start_s"]), list(recv["end_s"]))
        for lane in range(max(lanes, default=-1) + 1):
            names[tid + 1 + lane] = f"stage {stage}: p2p receive" + (f" #{lane}" if lane else "")
        for lane, row in zip(lanes, recv.itertuples(index=False), strict=True):
            what = "gradient" if row.backward else "activation"
            spans.append({"tid": tid + 1 + lane, "name": f"recv {what} {row.micro_batch}",
                          "cat": "p2p", "start_s": row.start_s, "end_s": row.end_s,
                          "args": {"from_stage": int(row.from_stage)}})
        tid += max(lanes, default=-1) + 1
    tid += 1
    names[tid] = "after the pipeline (critical stage)"
    for row in sched.tail.itertuples(index=False):
        spans.append({"tid": tid, "name": row.name, "cat": "step", "start_s": row.start_s,
                      "end_s": row.end_s, "args": {}})
    return spans, names


def training_trace(schedule: TrainSchedule, process: str = "perfcast training iteration"
                   ) -> dict:
    """Chrome trace-event JSON of one iteration (see `training_schedule`): metadata events,
    then complete ('X') events in time order, microseconds; the last ends at the
    forecast's iteration time."""
    spans, names = _spans(schedule)
    events = [{"ph": "M", "name": "process_name", "pid": _PID, "args": {"name": process}}]
    events += [{"ph": "M", "name": "thread_name", "pid": _PID, "tid": t, "args": {"name": n}}
               for t, n in names.items()]
    events += [{"ph": "M", "name": "thread_sort_index", "pid": _PID, "tid": t,
                "args": {"sort_index": t}} for t in names]
    frame = pd.DataFrame(spans).sort_values(["start_s", "tid"], kind="stable")
    for s in frame.itertuples(index=False):
        events.append({"ph": "X", "pid": _PID, "tid": int(s.tid), "name": s.name, "cat": s.cat,
                       "ts": s.start_s * _US, "dur": (s.end_s - s.start_s) * _US,
                       "args": s.args})
    fc = schedule.forecast
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"schedule": schedule.schedule, "stages": schedule.stages,
                          "micro_batches": schedule.micro_batches, "chunks": schedule.chunks,
                          "iteration_time_s": fc.iteration_time_s,
                          "bubble_fraction": fc.bubble_fraction}}
