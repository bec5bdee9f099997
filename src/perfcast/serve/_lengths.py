"""Request lengths (prompt and output tokens): fixed, uniform, bounded Zipf, the shipped
traces (serve/data/, see its README) and a user's CSV; and the max-total-length clip.

Samplers are pure functions of their arguments and a `numpy.random.Generator`; lengths are
int64 >= 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.errors import InputError, close_matches

__all__ = ["TRACES", "Trace", "clip_total", "fixed_lengths", "load_csv", "load_trace",
           "uniform_lengths", "zipf_lengths"]

TRACES = ("arxiv", "splitwise-conv", "splitwise-code")
CSV_COLUMNS = ("prompt_tokens", "output_tokens", "arrival_s")


@dataclass(frozen=True)
class Trace:
    """Recorded requests: lengths per request, and arrival times if the source has them."""

    name: str
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    arrival_s: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.prompt_tokens)


def _int(field: str, value, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise InputError(field, f"must be an integer >= {low}, got {value!r}", f">= {low}")
    return int(value)


def fixed_lengths(n: int, tokens: int, field: str = "prompt_tokens") -> np.ndarray:
    """`n` requests of exactly `tokens` tokens."""
    return np.full(n, _int(field, tokens), dtype=np.int64)


def uniform_lengths(n: int, lo: int, hi: int, rng: np.random.Generator,
                    field: str = "prompt_tokens") -> np.ndarray:
    """Integers drawn uniformly from [lo, hi], both ends included."""
    lo, hi = _int(field, lo), _int(field, hi)
    if hi < lo:
        raise InputError(field, f"uniform range ({lo}, {hi}) has hi < lo", "(lo, hi), lo <= hi")
    return rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64)


def zipf_lengths(n: int, a: float, max_tokens: int, rng: np.random.Generator,
                 field: str = "prompt_tokens") -> np.ndarray:
    """Zipf lengths on 1..max_tokens: P(k) ∝ k^-a (a > 0; any a works, the support is
    finite), sampled by inverting the exact cumulative distribution."""
    max_tokens = _int(field, max_tokens)
    try:
        a = float(a)
    except (TypeError, ValueError):
        raise InputError(field, f"zipf exponent must be a number, got {a!r}",
                         "(a > 0, max)") from None
    if not np.isfinite(a) or a <= 0:
        raise InputError(field, f"zipf exponent must be finite and > 0, got {a}", "(a > 0, max)")
    cdf = np.cumsum(np.arange(1, max_tokens + 1, dtype=np.float64) ** -a)
    idx = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
    return np.minimum(idx, max_tokens - 1).astype(np.int64) + 1


def clip_total(prompt: np.ndarray, output: np.ndarray, max_tokens: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Requests longer than `max_tokens` in total lose the excess from both sides in
    proportion to their lengths (rounded up), keeping >= 1 token each — the way Vidur fits
    its traces into a 4096-token context. Shorter requests are unchanged."""
    max_tokens = _int("max_tokens", max_tokens, low=2)
    total = prompt + output
    over = np.maximum(total - max_tokens, 0)
    p = np.maximum(prompt - np.ceil(over * prompt / total).astype(np.int64), 1)
    o = np.minimum(np.maximum(output - np.ceil(over * output / total).astype(np.int64), 1),
                   max_tokens - p)
    return p, o


def _check_lengths(name: str, df: pd.DataFrame) -> Trace:
    for col in ("prompt_tokens", "output_tokens"):
        v = pd.to_numeric(df[col], errors="coerce")
        bad = v.isna() | (v < 1) | (v != np.floor(v))
        if bad.any():
            i = int(np.argmax(bad.to_numpy()))
            cell = df[col].iloc[i]
            cell = cell.item() if isinstance(cell, np.generic) else cell  # 0, not np.int64(0)
            raise InputError(col, f"{name} row {i + 1}: {cell!r} is not an integer >= 1",
                             "integers >= 1")
    arrival = None
    if "arrival_s" in df:
        arrival = pd.to_numeric(df["arrival_s"], errors="coerce").to_numpy(np.float64)
        if not np.isfinite(arrival).all() or (arrival < 0).any() or (np.diff(arrival) < 0).any():
            raise InputError("arrival_s", f"{name}: must be finite seconds >= 0, sorted "
                             "(non-decreasing)", "non-decreasing seconds >= 0")
    return Trace(name, df["prompt_tokens"].to_numpy(np.int64),
                 df["output_tokens"].to_numpy(np.int64), arrival)


@cache
def load_trace(name: str) -> Trace:
    """A shipped trace by name: 'arxiv' (arXiv summarisation, no arrival times),
    'splitwise-conv' and 'splitwise-code' (Azure LLM inference 2023, with arrival times)."""
    if name not in TRACES:
        raise InputError("trace", f"unknown trace {name!r}"
                         + (f"; did you mean {', '.join(close_matches(str(name), TRACES))}?"
                            if close_matches(str(name), TRACES) else ""), TRACES)
    import pyarrow.parquet as pq  # here: ~25 ms (and ssl) that only a trace needs

    with (resources.files("perfcast.serve") / "data" / f"{name}.parquet").open("rb") as f:
        table = pq.read_table(f, use_threads=False)  # no pool left running at exit
    return _check_lengths(name, table.to_pandas())


def load_csv(path: str | Path) -> Trace:
    """A user's requests: CSV with columns prompt_tokens, output_tokens and optionally
    arrival_s (seconds, non-decreasing); other columns are ignored."""
    p = Path(path)
    if not p.is_file():
        raise InputError("csv", f"{p} is not a file", "a CSV with prompt_tokens, output_tokens"
                         " [, arrival_s]")
    try:
        df = pd.read_csv(p)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise InputError("csv", f"{p} is not a readable CSV ({e})") from None
    for col in CSV_COLUMNS[:2]:
        if col not in df:
            near = close_matches(col, [str(c) for c in df.columns if c not in CSV_COLUMNS])
            hint = f"; did you mean {', '.join(near)}?" if near else ""
            raise InputError("csv", f"{p} has no column {col!r}{hint}", CSV_COLUMNS)
    if len(df) == 0:
        raise InputError("csv", f"{p} has no rows", ">= 1 request")
    return _check_lengths(str(p), df)
