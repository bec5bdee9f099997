"""How a step's kernels are launched: eager (the host dispatches each one) or replayed as a
CUDA graph. Its own module so that requests and options can name it without loading the
step composer's table machinery (pandas)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Execution"]


class Execution(StrEnum):
    EAGER = "eager"
    CUDA_GRAPH = "cuda-graph"
