"""A forecast step as a timeline, and that timeline as Chrome-trace / Perfetto JSON.

Tracks: the host thread (one dispatch span per eager kernel launch), the GPU compute stream
and a communication stream (collectives). Kernel start = max(its dispatch, the previous
kernel's end), the same queue step_time prices, so the last span ends at the step time (less
engine host time, drawn first). Open the JSON in https://ui.perfetto.dev or chrome://tracing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfcast.compose._step import EAGER_DISPATCH_S, Execution, StepForecast, kernel_sequence
from perfcast.ops import COMM_FAMILIES

__all__ = ["chrome_trace", "step_timeline"]

_TRACKS = {"host": 1, "gpu": 2, "comm": 3}
_TRACK_NAMES = {"host": "host (dispatch)", "gpu": "GPU stream (kernels)",
                "comm": "GPU stream (collectives)"}


def step_timeline(step: StepForecast, execution: Execution | str = "cuda-graph",
                  dispatch_s: float | None = None) -> pd.DataFrame:
    """Spans {name, track, family, layer, start_s, dur_s}, one per kernel launch (and per
    eager dispatch), in issue order."""
    ops = step.ops
    seq = kernel_sequence(ops)
    dur = ops["time_s"].to_numpy(dtype=float)[seq]
    eager = Execution(execution) == Execution.EAGER
    d = (EAGER_DISPATCH_S if dispatch_s is None else dispatch_s) if eager else 0.0
    issued = step.host_s + d * np.arange(1, len(seq) + 1)
    start = np.empty(len(seq))
    end = step.host_s
    for j in range(len(seq)):  # the queue recurrence: start_j = max(issue_j, end_{j-1})
        start[j] = max(issued[j], end)
        end = start[j] + dur[j]
    fam = ops["family"].to_numpy(dtype=object)[seq]
    names = ops["op"].to_numpy(dtype=object)[seq]
    layers = ops["layer"].to_numpy(dtype=object)[seq]
    track = np.where(np.isin(fam, list(COMM_FAMILIES)), "comm", "gpu")
    spans = [pd.DataFrame({"name": names, "track": track, "family": fam, "layer": layers,
                           "start_s": start, "dur_s": dur})]
    if eager:
        spans.append(pd.DataFrame({"name": "dispatch " + pd.Series(names, dtype=object),
                                   "track": "host", "family": "host", "layer": layers,
                                   "start_s": issued - d, "dur_s": d}))
    if step.host_s:
        spans.append(pd.DataFrame([{"name": "engine host work", "track": "host",
                                    "family": "host", "layer": "", "start_s": 0.0,
                                    "dur_s": step.host_s}]))
    return pd.concat(spans, ignore_index=True)


def chrome_trace(timeline: pd.DataFrame, process: str = "perfcast forecast") -> dict:
    """Chrome trace-event JSON (complete 'X' events, microseconds) of a timeline."""
    events = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": process}}]
    events += [{"ph": "M", "name": "thread_name", "pid": 1, "tid": tid,
                "args": {"name": _TRACK_NAMES[t]}} for t, tid in _TRACKS.items()]
    for row in timeline.itertuples(index=False):
        events.append({"ph": "X", "pid": 1, "tid": _TRACKS[row.track], "name": str(row.name),
                       "cat": str(row.family), "ts": row.start_s * 1e6, "dur": row.dur_s * 1e6,
                       "args": {"layer": str(row.layer)}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}
