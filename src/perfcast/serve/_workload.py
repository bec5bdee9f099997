"""The requests a serving simulation replays: when each arrives and how long it is.

`make_workload` is the one entry point: arrivals (Poisson, gamma, trace replay or a closed
loop) times lengths (fixed, uniform, Zipf, a shipped trace or a user's CSV), clipped to a
maximum total length (the deployment's max model length); how many were clipped is kept in
`Workload.clipped`, so a caller reports it, never hides it. Same arguments and seed ->
bit-identical arrays. Arrivals, prompt lengths and output lengths use separate child streams
of `numpy.random.default_rng(seed)`, so changing the length distribution leaves the arrival
times as they were.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfcast.errors import InputError, close_matches
from perfcast.serve._arrivals import (
    closed_loop_arrivals,
    gamma_arrivals,
    poisson_arrivals,
    positive,
    rate_scale,
    replay_arrivals,
)
from perfcast.serve._lengths import (
    Trace,
    clip_total,
    fixed_lengths,
    load_csv,
    load_trace,
    uniform_lengths,
    zipf_lengths,
)
from perfcast.serve._sharing import check_sharing, conversations, shared_prefix

__all__ = ["ARRIVALS", "LENGTHS", "Workload", "make_workload"]

ARRIVALS = ("poisson", "gamma", "trace", "closed_loop")
LENGTHS = ("fixed", "uniform", "zipf", "trace", "csv")
SIDE_FORMS = {"fixed": "an int", "uniform": "(lo, hi)", "zipf": "(a, max)"}


@dataclass(frozen=True, eq=False)  # arrays: identity equality, hashable
class Workload:
    """Requests in arrival order. `concurrency` set = closed loop: arrival times are ignored
    and that many requests are kept in flight (benchmark clients' --max-concurrency).

    Shared content (for prefix caching): `prefix_group[r]` (-1: none) names the content the
    first `prefix_tokens[r]` tokens of request r's prompt + output sequence come from, so two
    requests of one group have identical KV blocks up to the shorter of their prefix lengths
    (a shared system prompt; every turn of one conversation, whose sequence extends the last
    turn's). Sessions: `follows[r]` (-1: none) is a request whose completion, seen by the
    client, plus `think_s[r]` seconds, is when r arrives (the next turn of a chat).
    `preloaded_tokens[r]`: leading tokens whose KV arrives with the request (computed
    elsewhere: the decode pool of a disaggregated deployment), at most prompt_tokens - 1.
    `clipped`: requests whose drawn or recorded lengths were cut to `make_workload`'s
    max_tokens (0: none)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    concurrency: int | None = None
    prefix_group: np.ndarray | None = None
    prefix_tokens: np.ndarray | None = None
    follows: np.ndarray | None = None
    think_s: np.ndarray | None = None
    preloaded_tokens: np.ndarray | None = None
    clipped: int = 0

    def __post_init__(self) -> None:
        arrays = {}
        for name, dtype in (("arrival_s", np.float64), ("prompt_tokens", np.int64),
                            ("output_tokens", np.int64)):
            raw = np.asarray(getattr(self, name))
            if raw.ndim != 1 or len(raw) == 0:
                raise InputError(name, "must be a non-empty 1-D array", "one entry per request")
            if name != "arrival_s" and (raw.dtype.kind not in "iu"
                                        and not np.array_equal(raw, np.floor(raw))):
                raise InputError(name, "must hold whole token counts", "integers >= 1")
            arrays[name] = raw.astype(dtype)
        if len({len(a) for a in arrays.values()}) != 1:
            raise InputError("arrival_s", "arrival_s, prompt_tokens and output_tokens must "
                             "have one entry per request (equal lengths)")
        t = arrays["arrival_s"]
        if not np.isfinite(t).all() or t[0] < 0 or (np.diff(t) < 0).any():
            raise InputError("arrival_s", "must be finite, start at >= 0 and never decrease",
                             "sorted seconds >= 0")
        for name in ("prompt_tokens", "output_tokens"):
            if (arrays[name] < 1).any():
                raise InputError(name, "every request needs >= 1 token", ">= 1")
        c = self.concurrency
        if c is not None and (isinstance(c, bool) or not isinstance(c, int | np.integer)
                              or c < 1):
            raise InputError("concurrency", f"must be None or an integer >= 1, got {c!r}")
        for name, a in arrays.items():
            a.flags.writeable = False
            object.__setattr__(self, name, a)
        if c is not None:
            object.__setattr__(self, "concurrency", int(c))
        for name, value in check_sharing(self).items():
            value.flags.writeable = False
            object.__setattr__(self, name, value)

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def has_sessions(self) -> bool:
        return self.follows is not None and bool((self.follows >= 0).any())


def _choice(field: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        near = close_matches(str(value), allowed)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise InputError(field, f"unknown {field} {value!r}{hint}", allowed)
    return value


def _side(n: int, lengths: str, spec, field: str, rng: np.random.Generator) -> np.ndarray:
    """One side's (prompt or output) lengths from its spec for a synthetic distribution."""
    form = SIDE_FORMS[lengths]
    if spec is None:
        raise InputError(field, f"lengths={lengths!r} needs {field} as {form}", form)
    if lengths == "fixed":
        return fixed_lengths(n, spec, field)
    if not isinstance(spec, tuple | list) or len(spec) != 2:
        raise InputError(field, f"lengths={lengths!r} needs {field} as {form}, got {spec!r}",
                         form)
    if lengths == "uniform":
        return uniform_lengths(n, spec[0], spec[1], rng, field)
    return zipf_lengths(n, spec[0], spec[1], rng, field)


def _source(trace: str | None, csv) -> Trace:
    if csv is not None:
        return load_csv(csv)
    if trace is None:
        raise InputError("trace", "trace replay needs a shipped trace name or csv=PATH",
                         ("arxiv", "splitwise-conv", "splitwise-code"))
    return load_trace(trace)


def _arrivals(n, arrival, qps, cv, concurrency, trace, csv, rng) -> np.ndarray:
    if arrival != "closed_loop" and concurrency is not None:
        raise InputError("concurrency", f"is only used with arrival='closed_loop' (got "
                         f"arrival={arrival!r})", "None, or arrival='closed_loop'")
    if arrival == "closed_loop":
        if concurrency is None:
            raise InputError("concurrency", "arrival='closed_loop' needs concurrency (requests "
                             "kept in flight)", "an integer >= 1")
        return closed_loop_arrivals(n)
    if arrival == "trace":
        src = _source(trace, csv)
        if src.arrival_s is None:
            raise InputError("arrival", f"{src.name} has no arrival times",
                             "a trace with arrivals (splitwise-conv, splitwise-code, a CSV "
                             "with arrival_s), or arrival='poisson'/'gamma'")
        head = replay_arrivals(src.arrival_s, n)
        return replay_arrivals(src.arrival_s, n,
                               1.0 if qps is None else rate_scale(head, qps))
    if qps is None:
        raise InputError("qps", f"arrival={arrival!r} needs qps (requests per second)", "> 0")
    if arrival == "poisson":
        return poisson_arrivals(n, qps, rng)
    if cv is None:
        raise InputError("cv", "arrival='gamma' needs cv (coefficient of variation of the "
                         "gaps; 1 = Poisson, > 1 bursty)", "> 0")
    return gamma_arrivals(n, qps, positive("cv", cv), rng)


def make_workload(num_requests: int, *, arrival: str = "poisson", qps: float | None = None,
                  cv: float | None = None, concurrency: int | None = None,
                  lengths: str = "fixed", prompt_tokens=None, output_tokens=None,
                  trace: str | None = None, csv=None, max_tokens: int | None = 4096,
                  system_prompt_tokens: int | None = None, prompt_groups: int = 1,
                  turns: int | None = None, think_s: float = 0.0, seed: int = 0) -> Workload:
    """`num_requests` requests. arrival: 'poisson' (qps), 'gamma' (qps, cv), 'trace' (the
    arrival times of `csv` if given, else of shipped `trace`; repeated past its end; qps set
    rescales them to that mean rate) or 'closed_loop' (concurrency). lengths: 'fixed'
    (prompt_tokens / output_tokens ints), 'uniform' ((lo, hi) each), 'zipf' ((a, max) each),
    'trace' (shipped `trace`: 'arxiv', 'splitwise-conv', 'splitwise-code') or 'csv' (`csv`
    path). Recorded lengths are taken in order when arrivals replay the same source, else in
    a seeded random order. Totals above `max_tokens` are clipped (None: no clip) and counted
    in `Workload.clipped`; fixed lengths above it are refused. Sharing (prefix caching):
    `system_prompt_tokens` prepends one of `prompt_groups` shared system prompts to every
    prompt; `turns` makes chats of that many consecutive requests, the drawn prompt lengths
    being each turn's new message and a turn arriving `think_s` after the last answer (see
    perfcast.serve._sharing)."""
    arrival = _choice("arrival", arrival, ARRIVALS)
    lengths = _choice("lengths", lengths, LENGTHS)
    if isinstance(num_requests, bool) or not isinstance(num_requests, int | np.integer) \
            or num_requests < 1:
        raise InputError("num_requests", f"must be an integer >= 1, got {num_requests!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InputError("seed", f"must be an integer >= 0, got {seed!r}")
    n = int(num_requests)
    r_arrival, r_prompt, r_output = np.random.default_rng(seed).spawn(3)
    times = _arrivals(n, arrival, qps, cv, concurrency, trace, csv, r_arrival)
    if lengths in SIDE_FORMS:
        prompt = _side(n, lengths, prompt_tokens, "prompt_tokens", r_prompt)
        output = _side(n, lengths, output_tokens, "output_tokens", r_output)
    else:
        if lengths == "csv" and csv is None:
            raise InputError("csv", "lengths='csv' needs csv=PATH", "a CSV file path")
        src = load_csv(csv) if lengths == "csv" else _source(trace, None)
        same = arrival == "trace" and (lengths == "csv" or csv is None)
        order = (np.arange(n) if same else np.concatenate(
            [r_prompt.permutation(len(src)) for _ in range(-(-n // len(src)))])) % len(src)
        prompt, output = src.prompt_tokens[order[:n]], src.output_tokens[order[:n]]
    clipped = 0
    if max_tokens is not None:
        if lengths == "fixed" and int(prompt[0] + output[0]) > max_tokens:
            raise InputError("max_tokens", f"fixed prompt_tokens + output_tokens = "
                             f"{int(prompt[0] + output[0])} exceeds max_tokens={max_tokens}",
                             "a larger max_tokens, or None")
        clipped = int((prompt + output > max_tokens).sum())
        prompt, output = clip_total(prompt, output, max_tokens)
    if system_prompt_tokens is not None and turns is not None:
        raise InputError("turns", "system prompts and chats together are not modelled yet "
                         "(one level of shared content per request)", "one of them")
    extra = {}
    if system_prompt_tokens is not None:
        prompt, group, shared = shared_prefix(prompt, system_prompt_tokens, prompt_groups,
                                              np.random.default_rng(seed).spawn(4)[3])
        extra = {"prefix_group": group, "prefix_tokens": shared}
    elif turns is not None:
        chats = conversations(prompt, output, turns, think_s)
        prompt = chats.pop("prompt")
        extra = {"prefix_group": chats["group"], "prefix_tokens": chats["prefix_tokens"],
                 "follows": chats["follows"], "think_s": chats["think_s"]}
        times = times[chats["group"]]  # chat c starts at the c-th arrival (qps: chats/s)
    return Workload(times, prompt, output, concurrency, **extra, clipped=clipped)
