"""Shared content and sessions in a workload: the fields prefix caching and multi-turn chat
need (see `Workload`), their validation, and the two generators `make_workload` offers.

- `shared_prefix`: every prompt starts with one of `groups` system prompts of `tokens`
  tokens (picked uniformly, seeded), e.g. an assistant's instructions.
- `conversations`: consecutive requests form chats of `turns` turns; turn k's prompt is the
  whole conversation so far (earlier prompts and answers) plus its new user message, and it
  arrives `think_s` after the client saw turn k-1's answer.
"""

from __future__ import annotations

import numpy as np

from perfcast.errors import InputError

__all__ = ["check_sharing", "conversations", "shared_prefix"]


def _ints(name: str, value, n: int, low: int) -> np.ndarray:
    raw = np.asarray(value)
    if raw.shape != (n,) or (raw.dtype.kind not in "iu"
                             and not np.array_equal(raw, np.floor(raw))):
        raise InputError(name, f"must be {n} whole numbers (one per request)")
    out = raw.astype(np.int64)
    if (out < low).any():
        raise InputError(name, f"entries must be >= {low}", f">= {low}")
    return out


def check_sharing(w) -> dict[str, np.ndarray]:
    """Validated prefix/session arrays of a Workload (only the ones it sets)."""
    n, out = len(w.arrival_s), {}
    if (w.prefix_group is None) != (w.prefix_tokens is None):
        raise InputError("prefix_group", "give prefix_group and prefix_tokens together")
    if w.prefix_group is not None:
        group = _ints("prefix_group", w.prefix_group, n, -1)
        tokens = _ints("prefix_tokens", w.prefix_tokens, n, 0)
        if (tokens > w.prompt_tokens + w.output_tokens).any():
            raise InputError("prefix_tokens", "cannot exceed prompt_tokens + output_tokens")
        out.update(prefix_group=group, prefix_tokens=np.where(group >= 0, tokens, 0))
    if w.think_s is not None and w.follows is None:
        raise InputError("think_s", "only means something with follows (sessions)")
    if w.follows is not None:
        follows = _ints("follows", w.follows, n, -1)
        if (follows >= np.arange(n)).any():
            raise InputError("follows", "a request can only follow an earlier one",
                             "-1 or an index < its own")
        if w.concurrency is not None and (follows >= 0).any():
            raise InputError("follows", "sessions need open-loop arrivals for their first "
                             "turns (concurrency must be None)")
        think = np.zeros(n) if w.think_s is None else np.asarray(w.think_s, dtype=float)
        if think.shape != (n,) or not np.isfinite(think).all() or (think < 0).any():
            raise InputError("think_s", "must be finite seconds >= 0, one per request")
        out.update(follows=follows, think_s=think)
    if w.preloaded_tokens is not None:
        pre = _ints("preloaded_tokens", w.preloaded_tokens, n, 0)
        if (pre >= w.prompt_tokens).any():
            raise InputError("preloaded_tokens", "must leave at least one prompt token to "
                             "compute", "< prompt_tokens")
        out["preloaded_tokens"] = pre
    return out


def shared_prefix(prompt: np.ndarray, tokens: int, groups: int, rng: np.random.Generator
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(prompts with the system prompt prepended, group per request, prefix tokens)."""
    for name, value, low in (("system_prompt_tokens", tokens, 1), ("prompt_groups", groups, 1)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
            raise InputError(name, f"must be an integer >= {low}, got {value!r}")
    group = rng.integers(0, groups, len(prompt))
    return prompt + tokens, group, np.full(len(prompt), tokens, dtype=np.int64)


def conversations(new_tokens: np.ndarray, output: np.ndarray, turns: int, think_s: float
                  ) -> dict[str, np.ndarray]:
    """Chats of `turns` consecutive requests: prompts, groups, prefix tokens, follows and
    think times (turn k > 0 follows turn k-1 of its chat)."""
    if isinstance(turns, bool) or not isinstance(turns, int | np.integer) or turns < 1:
        raise InputError("turns", f"must be an integer >= 1, got {turns!r}")
    if not np.isfinite(think_s) or think_s < 0:
        raise InputError("think_s", f"must be seconds >= 0, got {think_s!r}")
    n = len(new_tokens)
    idx = np.arange(n)
    turn, chat = idx % turns, idx // turns
    prompt = np.empty(n, dtype=np.int64)
    history = 0
    for r in range(n):  # turn k's prompt: the chat so far plus the new message
        history = 0 if turn[r] == 0 else history
        prompt[r] = history + new_tokens[r]
        history = prompt[r] + output[r]
    return {"prompt": prompt, "group": chat, "prefix_tokens": prompt + output,
            "follows": np.where(turn > 0, idx - 1, -1),
            "think_s": np.where(turn > 0, float(think_s), 0.0)}
