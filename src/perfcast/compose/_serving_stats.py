"""The few statistics of a mixed batch that a serving step's time depends on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfcast.errors import InputError
from perfcast.ops import Batch, attended_keys

__all__ = ["BatchStats", "prefill_point", "scalar_stats"]

FIELDS = ("prefill_tokens_total", "prefill_seqs", "prefill_keys_total", "prefill_pairs",
          "decode_seqs", "decode_keys_total")


def prefill_point(seqs, tokens, keys, pairs):
    """Prefill attention grid coordinates: (sequences, mean new tokens, mean cached context,
    pairs over those of a batch of equal sequences with the mean shape). The ratio keeps the
    grid small (13 points span 1/256-16x imbalance; absolute pairs would need ~70)."""
    s = np.maximum(seqs, 1)
    q, c = tokens / s, (keys - tokens) / s
    equal = np.maximum(s * (q * c + q * (q + 1) / 2), 1e-300)  # 0 pairs when no prefill
    return seqs, q, c, pairs / equal


@dataclass(frozen=True)
class BatchStats:
    """Batch statistics, one array entry per step. Prefill: new tokens, sequences, keys
    (cached context + new tokens, summed) and attended query-key pairs (causal, sliding
    window applied); decode: sequences and keys read (context, clipped to the window)."""

    prefill_tokens_total: np.ndarray
    prefill_seqs: np.ndarray
    prefill_keys_total: np.ndarray
    prefill_pairs: np.ndarray
    decode_seqs: np.ndarray
    decode_keys_total: np.ndarray

    def __post_init__(self) -> None:
        arrays = [np.atleast_1d(np.asarray(getattr(self, f), dtype=float)) for f in FIELDS]
        if len({a.shape for a in arrays}) != 1 or arrays[0].ndim != 1:
            raise InputError("batch_stats", "all fields must be 1-D arrays of one length")
        for name, a in zip(FIELDS, arrays, strict=True):
            if not np.all(np.isfinite(a)) or (a < 0).any():
                raise InputError(name, "entries must be finite and >= 0", ">= 0")
            object.__setattr__(self, name, a)
        pt, ps, pk, pp, ds, dk = arrays
        if ((ps > 0) != (pt > 0)).any() or (pt < ps).any() or (pk < pt).any():
            raise InputError("prefill_seqs", "each prefilling sequence brings >= 1 new token "
                             "and keys include the new tokens")
        if ((ps > 0) & (pp <= 0)).any():
            raise InputError("prefill_pairs", "must be > 0 when there are prefill tokens")
        if (dk < ds).any():
            raise InputError("decode_keys_total", "each decoding sequence reads >= 1 key")
        if ((ps + ds) == 0).any():
            raise InputError("batch", "a step needs at least one sequence")

    def __len__(self) -> int:
        return len(self.prefill_seqs)

    @classmethod
    def of(cls, batch: Batch, sliding_window: int | None = None) -> BatchStats:
        """The statistics of one `perfcast.ops.Batch` (pass the model's sliding window)."""
        return cls(*[np.array([v], dtype=float)
                     for v in scalar_stats(batch.prefill_tokens, batch.prefill_context,
                                           batch.decode_context, sliding_window)])

    def prefill_points(self) -> tuple[np.ndarray, ...]:
        return prefill_point(self.prefill_seqs, self.prefill_tokens_total,
                             self.prefill_keys_total, self.prefill_pairs)

    @classmethod
    def concat(cls, parts: list[BatchStats]) -> BatchStats:
        return cls(*[np.concatenate([getattr(p, f) for p in parts]) for f in FIELDS])


def _ints(name: str, values, low: int):
    try:
        if len(values) and min(values) < low:
            raise InputError(name, f"every entry must be >= {low}, got {min(values)}",
                             f">= {low}")
    except TypeError:
        raise InputError(name, "must be a sequence of integers") from None
    return values


def scalar_stats(prefill_tokens, prefill_context, decode_context, window: int | None
                 ) -> tuple[float, float, float, float, float, float]:
    """The six statistics of one batch given as sequences of ints, in plain Python."""
    pt = _ints("prefill_tokens", prefill_tokens, 1)
    pc = _ints("prefill_context", prefill_context, 0) if prefill_context else (0,) * len(pt)
    dc = _ints("decode_context", decode_context, 1)
    if len(pc) != len(pt):
        raise InputError("prefill_context", "needs one entry per prefilling sequence")
    if not pt and not dc:
        raise InputError("batch", "a step needs at least one sequence")
    tokens = sum(pt)
    if window:
        pairs = float(attended_keys(np.array(pt), np.array(pc), window).sum()) if pt else 0.0
        keys_d = sum(min(c, window) for c in dc)
    else:
        pairs = sum(q * c + q * (q + 1) / 2 for q, c in zip(pt, pc, strict=True))
        keys_d = sum(dc)
    return (float(tokens), float(len(pt)), float(tokens + sum(pc)), float(pairs),
            float(len(dc)), float(keys_d))
