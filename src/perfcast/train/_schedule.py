"""Pipeline schedules simulated as dependency graphs, not closed forms.

A schedule is a list of tasks (stage, micro-batch, forward/backward, model chunk) with two
kinds of edges: each stage runs its tasks in the schedule's order, and a task waits for its
input from the neighbouring stage (activation forward, gradient backward) plus a p2p send.
Orders follow the papers' and Megatron-LM's:
  GPipe (Huang et al. 2019): all forwards, then all backwards.
  1F1B / PipeDream-Flush (Narayanan et al. 2021): stage s warms up with min(p - s - 1, m)
  forwards, alternates one forward and one backward, then drains the backwards.
  Interleaved 1F1B (Narayanan et al. 2021, section 2.2): v model chunks per stage, chunk c of
  stage s holding model chunk c x p + s; forwards walk groups of p micro-batches through
  the chunks; warm-up (p - s - 1) x 2 + (v - 1) x p (Megatron-LM's schedules.py).
Tasks are evaluated level by level (a level's tasks depend only on earlier levels), each
level one vectorised step over every plan that shares the graph, so a sweep simulates
thousands of plans at once. With uniform stages and free sends the result reproduces the
closed forms: bubble (p - 1)/(m + p - 1) for GPipe and 1F1B, divided by v when interleaved.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = ["Schedule", "build_schedule", "held", "simulate"]


@dataclass(frozen=True)
class Schedule:
    """A schedule's task graph. Arrays are per task; `levels` lists task indices by depth."""

    p: int
    m: int
    v: int
    stage: np.ndarray
    backward: np.ndarray  # bool
    micro: np.ndarray
    chunk: np.ndarray
    prev: np.ndarray  # previous task on the same stage (-1: none)
    dep: np.ndarray  # data dependency (-1: none)
    cross: np.ndarray  # bool: dep runs on another stage (a p2p send)
    levels: tuple[np.ndarray, ...]
    order: np.ndarray  # [p, tasks per stage]: each stage's task indices in run order
    final_backward: np.ndarray  # [p, v]: each stage's backward tasks of the last micro-batch
    sends: np.ndarray  # [p]: p2p receives each stage waits on


def _forward_order(p: int, m: int, v: int) -> tuple[np.ndarray, np.ndarray]:
    """(micro-batch, chunk) of each forward in the order an interleaved stage runs them:
    groups of p micro-batches walk through the chunks (v = 1: micro-batches in order)."""
    k = np.arange(m * v)
    return (k // (p * v)) * p + k % p, (k // p) % v


def _stage_order(kind: str, s: int, p: int, m: int, v: int) -> tuple[np.ndarray, ...]:
    """(backward, micro-batch, chunk) arrays in the order stage s runs its tasks."""
    micro, chunk = _forward_order(p, m, v)
    total = m * v
    if kind == "gpipe":
        warm = total
    elif v == 1:
        warm = min(p - s - 1, m)
    else:
        warm = min((p - s - 1) * 2 + (v - 1) * p, total)
    steady = total - warm
    # positions: warm-up forwards, then forward/backward pairs, then the remaining backwards
    fwd_pos = np.concatenate([np.arange(warm), warm + 2 * np.arange(steady)])
    bwd_pos = np.concatenate([warm + 2 * np.arange(steady) + 1,
                              warm + 2 * steady + np.arange(total - steady)])
    backward = np.zeros(2 * total, dtype=bool)
    backward[bwd_pos] = True
    out_micro, out_chunk = np.empty(2 * total, dtype=int), np.empty(2 * total, dtype=int)
    out_micro[fwd_pos], out_chunk[fwd_pos] = micro, chunk
    out_micro[bwd_pos], out_chunk[bwd_pos] = micro, v - 1 - chunk
    return backward, out_micro, out_chunk


def _dependencies(b: np.ndarray, s: np.ndarray, i: np.ndarray, c: np.ndarray, p: int,
                  v: int) -> tuple[np.ndarray, ...]:
    """(backward, stage, micro, chunk) of the task feeding each task; stage -1 for none.
    Forward: the previous stage's forward (stage 0 of chunk c > 0: the last stage's chunk
    c - 1); backward: the next stage's backward (the last stage: chunk c + 1 on stage 0, or
    its own forward of the last chunk)."""
    fwd_stage = np.where(s > 0, s - 1, np.where(c > 0, p - 1, -1))
    fwd_chunk = np.where(s > 0, c, c - 1)
    inner = s < p - 1
    bwd_b = inner | (c < v - 1)
    bwd_stage = np.where(inner, s + 1, np.where(c < v - 1, 0, p - 1))
    bwd_chunk = np.where(inner, c, np.where(c < v - 1, c + 1, v - 1))
    return (np.where(b, bwd_b, False), np.where(b, bwd_stage, fwd_stage), i,
            np.where(b, bwd_chunk, fwd_chunk))


@lru_cache(maxsize=256)
def build_schedule(kind: str, p: int, m: int, v: int = 1) -> Schedule:
    """The task graph of a schedule ('gpipe', '1f1b', 'interleaved-1f1b') for p stages,
    m micro-batches and v chunks per stage. Cached (the last 256): plans share graphs. Task ids are
    ((backward x p + stage) x m + micro) x v + chunk."""
    if p == 1:
        kind, v = "1f1b", 1  # gradient accumulation: forward then backward per micro-batch
    if kind != "interleaved-1f1b":
        v = 1

    def ids(b, s, i, c):
        return ((b.astype(int) * p + s) * m + i) * v + c

    n = 2 * p * m * v
    grid = np.arange(n)
    chunk, micro = grid % v, (grid // v) % m
    stage, backward = (grid // (v * m)) % p, (grid // (v * m * p)).astype(bool)
    order = np.array([ids(*(lambda o: (o[0], np.full(len(o[0]), s), o[1], o[2]))(
        _stage_order(kind, s, p, m, v))) for s in range(p)])
    prev = np.full(n, -1)
    prev[order[:, 1:]] = order[:, :-1]
    db, ds, di, dc = _dependencies(backward, stage, micro, chunk, p, v)
    dep = np.where(ds >= 0, ids(db, np.maximum(ds, 0), di, np.maximum(dc, 0)), -1)
    cross = (ds >= 0) & (ds != stage)
    last = np.arange(p)[:, None]
    final = ids(np.ones((p, v), dtype=bool), last, np.full((p, v), m - 1),
                np.arange(v)[None, :])
    sends = np.bincount(stage, weights=cross, minlength=p)
    levels = _levels(prev, dep) if p > 1 else ()  # one stage runs in its order (simulate)
    return Schedule(p, m, v, stage, backward, micro, chunk, prev, dep, cross, levels, order,
                    final, sends)


def _levels(prev: np.ndarray, dep: np.ndarray) -> tuple[np.ndarray, ...]:
    """Tasks grouped by longest-path depth: Kahn's algorithm one whole frontier at a time
    (each task feeds at most its successor on the stage and one dependent task). Tasks left
    over mean a dependency cycle, which is a schedule bug."""
    n = len(prev)
    dep = np.where(dep == prev, -1, dep)  # one edge when a parent is both
    indegree = (prev >= 0).astype(int) + (dep >= 0)
    succ, dependent = np.full(n, -1), np.full(n, -1)
    succ[prev[prev >= 0]] = np.flatnonzero(prev >= 0)
    dependent[dep[dep >= 0]] = np.flatnonzero(dep >= 0)
    frontier = np.flatnonzero(indegree == 0)
    levels, done = [], 0
    while len(frontier):
        levels.append(frontier)
        done += len(frontier)
        children = np.concatenate([succ[frontier], dependent[frontier]])
        children = children[children >= 0]
        np.subtract.at(indegree, children, 1)
        frontier = np.unique(children[indegree[children] == 0])
    if done != n:
        raise RuntimeError("pipeline schedule has a dependency cycle")
    return tuple(levels)


def simulate(schedule: Schedule, fwd_s: np.ndarray, bwd_s: np.ndarray,
             send_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end time of every task for n plans at once.

    fwd_s, bwd_s: [n, p, v] seconds of one micro-batch's forward/backward of each chunk;
    send_s: [n] seconds of one p2p activation (or gradient) send between stages.
    Returns (start, end), each [n, tasks]."""
    sc = schedule
    n, tasks = fwd_s.shape[0], len(sc.stage)
    dur = np.where(sc.backward[:, None], bwd_s[:, sc.stage, sc.chunk].T,
                   fwd_s[:, sc.stage, sc.chunk].T)  # [tasks, n]: rows gather cheaply
    if sc.p == 1:  # one stage: its tasks run back to back in its order
        order = sc.order[0]
        end = np.empty((tasks, n))
        end[order] = np.cumsum(dur[order], axis=0)
        return (end - dur).T, end.T
    send = np.asarray(send_s, dtype=float).reshape(1, n)
    end = np.zeros((tasks + 1, n))  # last row: a zero for tasks without a predecessor
    start = np.zeros((tasks, n))
    for level in sc.levels:
        prev, dep, cross = sc.prev[level], sc.dep[level], sc.cross[level]
        arrive = end[dep] + send if cross.all() else end[dep] + cross[:, None] * send
        ready = np.maximum(end[prev], arrive)
        start[level] = ready
        end[level] = ready + dur[level]
    return start.T, end[:tasks].T


def held(schedule: Schedule, weights: np.ndarray) -> np.ndarray:
    """[p, tasks per stage]: after each task of each stage, the sum of `weights[stage,
    chunk]` over forwards whose backward has not run yet (the activations the stage holds);
    its maximum over a row is the stage's peak."""
    order = schedule.order
    stage = np.arange(schedule.p)[:, None]
    w = weights[stage, schedule.chunk[order]]
    return np.cumsum(np.where(schedule.backward[order], -w, w), axis=1)
