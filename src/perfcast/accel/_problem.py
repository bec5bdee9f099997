"""Workloads as Timeloop-style loop nests: conv2d (N, C, M, R, S, P, Q), GEMM, depthwise conv.

A `Problem` names its seven loop bounds and how each tensor's coordinates project from them:
Weights[M, C, R, S], Inputs[N, C, P*stride + R*dilation, Q*stride + S*dilation],
Outputs[N, M, P, Q]. A depthwise conv indexes Inputs by M (one input channel per filter,
C = 1). A GEMM (m x k) @ (k x n) is the conv with P = m, C = k, M = n and 1x1 filters."""

from __future__ import annotations

import math
from functools import cache

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from perfcast.errors import InputError, from_validation_error

__all__ = ["DIMS", "Problem", "conv_problem", "gemm_problem", "make_problem", "tile_words"]

DIMS: tuple[str, ...] = ("N", "C", "M", "R", "S", "P", "Q")
_ALIASES = {"K": "M"}  # Timeloop's tutorials call output channels K


class Problem(BaseModel):
    """One layer: loop bounds, strides and dilation; `count` identical layers in the model."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    dims: dict[str, int]
    stride_h: int = Field(1, gt=0)
    stride_w: int = Field(1, gt=0)
    dilation_h: int = Field(1, gt=0)
    dilation_w: int = Field(1, gt=0)
    depthwise: bool = False
    count: int = Field(1, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _fill_dims(cls, data: dict) -> dict:
        if isinstance(data, dict) and isinstance(data.get("dims"), dict):
            dims = {_ALIASES.get(k, k): v for k, v in data["dims"].items()}
            unknown = sorted(set(dims) - set(DIMS))
            if unknown:
                raise ValueError(f"unknown loop dimension(s) {unknown} (allowed: {DIMS})")
            bad = {k: v for k, v in dims.items() if not isinstance(v, int) or v < 1}
            if bad:
                raise ValueError(f"loop bounds must be integers >= 1, got {bad}")
            data = {**data, "dims": {d: int(dims.get(d, 1)) for d in DIMS}}
        return data

    @model_validator(mode="after")
    def _depthwise_has_one_channel(self) -> Problem:
        if self.depthwise and self.dims["C"] != 1:
            raise ValueError("a depthwise conv has C = 1 (its channels are M)")
        return self

    @property
    def macs(self) -> int:
        return math.prod(self.dims.values())

    def axes(self, tensor: str) -> list[tuple[tuple[str, int], ...]]:
        """Each coordinate of `tensor` as (dim, coefficient) terms of the loop indices."""
        if tensor not in ("Weights", "Inputs", "Outputs"):
            raise InputError("tensor", f"unknown tensor {tensor!r}",
                             ("Weights", "Inputs", "Outputs"))
        return list(_axes(tensor, self.depthwise, self.stride_h, self.stride_w,
                          self.dilation_h, self.dilation_w))

    def size_words(self, tensor: str) -> int:
        """Distinct elements of a whole tensor."""
        return tile_words(self, tensor, self.dims)


@cache
def _axes(tensor: str, depthwise: bool, stride_h: int, stride_w: int, dilation_h: int,
          dilation_w: int) -> tuple[tuple[tuple[str, int], ...], ...]:
    """The projection of Problem.axes, cached: the mapper asks for it millions of times."""
    ch = "M" if depthwise else "C"
    if tensor == "Weights":
        axes = ((("M", 1),), (("R", 1),), (("S", 1),))
        return axes if depthwise else (*axes, (("C", 1),))
    if tensor == "Inputs":
        return ((("N", 1),), ((ch, 1),), (("P", stride_h), ("R", dilation_h)),
                (("Q", stride_w), ("S", dilation_w)))
    return ((("N", 1),), (("M", 1),), (("P", 1),), (("Q", 1),))


def axis_extent(axis: tuple[tuple[str, int], ...], tile: dict[str, int]) -> int:
    """Elements a tile spans along one tensor axis: sum of (bound-1)*coefficient, plus 1."""
    out = 1
    for dim, coef in axis:
        out += (tile[dim] - 1) * coef
    return out


def tile_words(problem: Problem, tensor: str, tile: dict[str, int]) -> int:
    """Elements of `tensor` touched by a tile of loop bounds (a hyper-rectangle)."""
    if tensor not in ("Weights", "Inputs", "Outputs"):
        problem.axes(tensor)  # raises, naming the allowed tensors
    out = 1
    for axis in _axes(tensor, problem.depthwise, problem.stride_h, problem.stride_w,
                      problem.dilation_h, problem.dilation_w):
        out *= axis_extent(axis, tile)
    return out


def conv_problem(name: str, *, n: int = 1, c: int, m: int, r: int, s: int | None = None,
                 p: int | None = None, q: int | None = None, h: int | None = None,
                 w: int | None = None, stride: int = 1, padding: int = 0, dilation: int = 1,
                 depthwise: bool = False, count: int = 1) -> Problem:
    """A conv2d layer, from output sizes (p, q) or input sizes (h, w) with padding."""
    s = r if s is None else s
    if p is None:
        if h is None:
            raise InputError("p", "give the output size p (or the input size h)")
        p = (h + 2 * padding - dilation * (r - 1) - 1) // stride + 1
    if q is None:
        q = p if w is None else (w + 2 * padding - dilation * (s - 1) - 1) // stride + 1
    dims = {"N": n, "C": 1 if depthwise else c, "M": m, "R": r, "S": s, "P": p, "Q": q}
    return make_problem(name=name, dims=dims, stride_h=stride, stride_w=stride,
                        dilation_h=dilation, dilation_w=dilation, depthwise=depthwise, count=count)


def gemm_problem(name: str, m: int, n: int, k: int, count: int = 1) -> Problem:
    """(m x k) @ (k x n) as a 1x1 conv: P = m rows, C = k reduction, M = n columns."""
    return make_problem(name=name, dims={"P": m, "C": k, "M": n}, count=count)


def make_problem(**fields: object) -> Problem:
    """A validated Problem; a bad field raises InputError naming it."""
    try:
        return Problem(**fields)
    except ValidationError as exc:
        raise from_validation_error(exc, prefix="problem.", default="dims") from None
