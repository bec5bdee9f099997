"""A serving simulation as Chrome trace-event JSON (open in https://ui.perfetto.dev):
process 1 holds one async track per request (queued -> prefill -> decode), process 2 one
thread per replica with its steps as complete events (needs `timeline=True`)."""

from __future__ import annotations

__all__ = ["serve_trace"]

_US = 1e6


def serve_trace(result) -> dict:
    events = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "requests"}},
              {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "replicas"}}]
    for row in result.requests.itertuples(index=False):
        rid = int(row.id)
        start = row.arrival_s + row.queueing_delay_s
        for name, a, b in (("request", row.arrival_s, row.completion_s),
                           ("queued", row.arrival_s, start),
                           ("prefill", start, row.first_token_s),
                           ("decode", row.first_token_s, row.completion_s)):
            common = {"pid": 1, "tid": 1, "cat": "request", "name": name, "id": rid}
            args = {"replica": int(row.replica), "prompt_tokens": int(row.prompt_tokens),
                    "output_tokens": int(row.output_tokens),
                    "preemptions": int(row.preemptions)} if name == "request" else {}
            events.append({**common, "ph": "b", "ts": a * _US, "args": args})
            events.append({**common, "ph": "e", "ts": b * _US})
    for replica, frame in (result.timelines or {}).items():
        events.append({"ph": "M", "name": "thread_name", "pid": 2, "tid": replica + 1,
                       "args": {"name": f"replica {replica}"}})
        for step in frame.itertuples(index=False):
            events.append({"ph": "X", "pid": 2, "tid": replica + 1, "cat": "step",
                           "name": "step", "ts": step.time_s * _US, "dur": step.duration_s * _US,
                           "args": {"batch_size": int(step.batch_size),
                                    "num_tokens": int(step.num_tokens),
                                    "kv_utilisation": float(step.kv_utilisation)}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}
