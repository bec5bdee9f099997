"""What one step processes: new tokens and cached context per sequence."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfcast.errors import InputError

__all__ = ["Batch", "attended_keys"]


@dataclass(frozen=True)
class Batch:
    """Sequences in one forward pass. Prefilling sequences bring `prefill_tokens` new tokens on
    top of `prefill_context` cached ones (chunked prefill); decoding sequences bring one new token
    each and attend over `decode_context` tokens (the new one included). `encoder_tokens` is
    the encoder length that encoder-decoder models cross-attend to."""

    prefill_tokens: tuple[int, ...] = ()
    prefill_context: tuple[int, ...] = ()
    decode_context: tuple[int, ...] = ()
    encoder_tokens: int = 0

    def __post_init__(self) -> None:
        if self.prefill_context and len(self.prefill_context) != len(self.prefill_tokens):
            raise InputError("prefill_context", "needs one entry per prefilling sequence")
        for name in ("prefill_tokens", "decode_context"):
            values = getattr(self, name)
            if any(v < 1 for v in values):
                raise InputError(name, f"every entry must be >= 1, got {min(values)}", ">= 1")
        if any(c < 0 for c in self.prefill_context):
            raise InputError("prefill_context", "entries must be >= 0", ">= 0")

    @classmethod
    def prefill(cls, batch: int, prompt_tokens: int) -> Batch:
        return cls(prefill_tokens=(prompt_tokens,) * batch)

    @classmethod
    def decode(cls, batch: int, context_tokens: int, encoder_tokens: int = 0) -> Batch:
        return cls(decode_context=(context_tokens,) * batch, encoder_tokens=encoder_tokens)

    @property
    def num_seqs(self) -> int:
        return len(self.prefill_tokens) + len(self.decode_context)

    @property
    def num_tokens(self) -> int:
        """Tokens through the GEMMs this step."""
        return int(sum(self.prefill_tokens)) + len(self.decode_context)

    def context(self) -> np.ndarray:
        return np.asarray(self.prefill_context or (0,) * len(self.prefill_tokens), dtype=float)


def _prefix_min_sum(x: np.ndarray, window: float) -> np.ndarray:
    """sum_{i=1..x} min(i, window)."""
    below = x * (x + 1) / 2
    above = window * (window + 1) / 2 + window * (x - window)
    return np.where(x <= window, below, above)


def attended_keys(new: np.ndarray, context: np.ndarray, window: int | None,
                  causal: bool = True) -> np.ndarray:
    """Query-key pairs per sequence when `new` tokens follow `context` cached ones.

    Causal: query at position p sees min(p + 1, window) keys; bidirectional: all keys.
    """
    new = np.asarray(new, dtype=float)
    context = np.asarray(context, dtype=float)
    if not causal:
        return new * (new + context)
    w = float(window) if window else np.inf
    if np.isinf(w):
        return new * context + new * (new + 1) / 2
    return _prefix_min_sum(context + new, w) - _prefix_min_sum(context, w)
