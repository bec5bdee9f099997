"""Eager op tables of torchvision-structured ResNets: one row per launched kernel.

The rows follow the eager-kernel vocabulary the torch backends use: `conv` as an implicit GEMM
(b=1, m=N·P·Q output pixels, n=C_out, k=C_in·R·S/groups), BatchNorm in eval mode as `bn` (an
affine per channel, m=N·C, n=H·W), in-place `relu`, the residual `add`, `maxpool` / `avgpool`
(m=N·C, n=H·W of the input) and the classifier `linear` (bias fused like addmm). Identical
kernels of a stage are merged into one row with `count`. Shapes follow torchvision's ResNet
(v1.5: the stride sits on the 3x3 conv of a Bottleneck)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from perfcast.errors import InputError, close_matches
from perfcast.ops._diffusion import conv_math
from perfcast.ops._table import COLUMNS
from perfcast.specs import DType, Precision, bytes_per_element

__all__ = ["CNN_MODELS", "cnn_ops"]

# name -> (block kind, blocks per stage); torchvision's ResNet table
_RESNETS: dict[str, tuple[str, tuple[int, int, int, int]]] = {
    "resnet18": ("basic", (2, 2, 2, 2)),
    "resnet34": ("basic", (3, 4, 6, 3)),
    "resnet50": ("bottleneck", (3, 4, 6, 3)),
    "resnet101": ("bottleneck", (3, 4, 23, 3)),
    "resnet152": ("bottleneck", (3, 8, 36, 3)),
}
CNN_MODELS: tuple[str, ...] = tuple(_RESNETS)
_STAGE_WIDTHS = (64, 128, 256, 512)
_NUM_CLASSES = 1000
_BN_FLOPS_PER_ELEM = 2.0  # scale and shift
_BN_PARAMS_PER_CHANNEL = 4  # running mean, running var, weight, bias
_ACTIVATION_FLOPS_PER_ELEM = 8.0  # the eager vocabulary counts 8 for every activation


def _out_size(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


@dataclass
class _Builder:
    """Accumulates kernel rows in launch order, merging identical kernels of a stage."""

    batch: int
    elem_bytes: float
    dtype: str
    rows: dict[tuple, dict]
    conv_dtype: str  # the convolutions' GEMM math (ops._diffusion.conv_math)

    def _add(self, layer: str, op: str, family: str, *, m: float, n: float, k: float = 0.0,
             flops: float, bytes_read: float, bytes_written: float) -> None:
        key = (layer, op, family, m, n, k, flops, bytes_read, bytes_written)
        if key in self.rows:
            self.rows[key]["count"] += 1
            return
        self.rows[key] = {"layer": layer, "op": op, "family": family, "phase": "forward",
                          "b": 1, "m": float(m), "n": float(n), "k": float(k),
                          "flops": float(flops), "bytes_read": float(bytes_read),
                          "bytes_written": float(bytes_written),
                          "dtype": self.conv_dtype if family == "conv" else self.dtype,
                          "count": 1}

    def conv(self, layer: str, c_in: int, c_out: int, size: int, kernel: int, stride: int,
             padding: int, groups: int = 1) -> int:
        """A conv2d without bias on [N, c_in, size, size]; returns the output size."""
        out = _out_size(size, kernel, stride, padding)
        m, n, k = self.batch * out * out, c_out, c_in * kernel * kernel // groups
        e = self.elem_bytes
        self._add(layer, "conv", "conv", m=m, n=n, k=k, flops=2.0 * m * n * k,
                  bytes_read=e * (self.batch * c_in * size * size + n * k),
                  bytes_written=e * m * n)
        return out

    def bn(self, layer: str, channels: int, size: int) -> None:
        m, n = self.batch * channels, size * size
        e = self.elem_bytes
        self._add(layer, "bn", "norm", m=m, n=n, flops=_BN_FLOPS_PER_ELEM * m * n,
                  bytes_read=e * (m * n + _BN_PARAMS_PER_CHANNEL * channels),
                  bytes_written=e * m * n)

    def vector(self, layer: str, op: str, family: str, channels: int, size: int,
               reads: int, out_elems: float | None = None) -> None:
        """An elementwise-style kernel on [N, C, size, size]: `reads` inputs of that shape."""
        m, n = self.batch * channels, size * size
        written = m * n if out_elems is None else out_elems
        per_elem = _ACTIVATION_FLOPS_PER_ELEM if family == "activation" else 1.0
        self._add(layer, op, family, m=m, n=n, flops=per_elem * m * n,
                  bytes_read=self.elem_bytes * reads * m * n,
                  bytes_written=self.elem_bytes * written)

    def linear(self, layer: str, tokens: int, out_features: int, in_features: int) -> None:
        e = self.elem_bytes
        self._add(layer, "linear", "gemm", m=tokens, n=out_features, k=in_features,
                  flops=2.0 * tokens * out_features * in_features,
                  bytes_read=e * (tokens * in_features + in_features * out_features),
                  bytes_written=e * tokens * out_features)


def _conv_bn(b: _Builder, layer: str, c_in: int, c_out: int, size: int, kernel: int,
             stride: int, relu: bool) -> int:
    out = b.conv(layer, c_in, c_out, size, kernel, stride, padding=kernel // 2)
    b.bn(layer, c_out, out)
    if relu:
        b.vector(layer, "relu", "activation", c_out, out, reads=1)
    return out


def _basic(b: _Builder, layer: str, c_in: int, planes: int, size: int, stride: int) -> int:
    """torchvision BasicBlock: conv3x3-bn-relu, conv3x3-bn, [downsample], add, relu."""
    out = _conv_bn(b, layer, c_in, planes, size, 3, stride, relu=True)
    _conv_bn(b, layer, planes, planes, out, 3, 1, relu=False)
    return _shortcut(b, layer, c_in, planes, size, out, stride)


def _shortcut(b: _Builder, layer: str, c_in: int, c_out: int, size: int, out: int,
              stride: int) -> int:
    """[1x1 downsample conv + bn when the shape changes], residual add, relu."""
    if stride != 1 or c_in != c_out:
        _conv_bn(b, layer, c_in, c_out, size, 1, stride, relu=False)
    b.vector(layer, "add", "elementwise", c_out, out, reads=2)
    b.vector(layer, "relu", "activation", c_out, out, reads=1)
    return out


def _bottleneck(b: _Builder, layer: str, c_in: int, planes: int, size: int, stride: int) -> int:
    """torchvision Bottleneck (v1.5): 1x1, 3x3 (stride), 1x1 x4, [downsample], add, relu."""
    wide = planes * 4
    _conv_bn(b, layer, c_in, planes, size, 1, 1, relu=True)
    out = _conv_bn(b, layer, planes, planes, size, 3, stride, relu=True)
    _conv_bn(b, layer, planes, wide, out, 1, 1, relu=False)
    return _shortcut(b, layer, c_in, wide, size, out, stride)


_BLOCKS: dict[str, tuple[Callable[..., int], int]] = {
    "basic": (_basic, 1), "bottleneck": (_bottleneck, 4)}


def _precision(precision: Precision | DType | str | None) -> DType:
    if precision is None:
        return DType.FP32
    if isinstance(precision, Precision):
        return precision.activations
    try:
        return DType(str(precision).lower())
    except ValueError:
        raise InputError("precision", f"unknown dtype {precision!r}",
                         [d.value for d in DType]) from None


def _model(name: str) -> tuple[str, tuple[int, int, int, int]]:
    key = str(name).strip().lower().replace("_", "").replace("-", "")
    if key not in _RESNETS:
        hint = close_matches(str(name), CNN_MODELS)
        problem = f"unknown CNN {name!r}" + (f"; did you mean {', '.join(hint)}?" if hint else "")
        raise InputError("model", problem, CNN_MODELS)
    return _RESNETS[key]


def cnn_ops(name: str, batch_size: int, image_size: int = 224,
            precision: Precision | DType | str | None = None,
            tf32: bool = False) -> pd.DataFrame:
    """The eager op table (perfcast.ops.COLUMNS) of one inference forward of a torchvision
    ResNet (`CNN_MODELS`) on `batch_size` RGB images of `image_size`² pixels, in eval mode.
    `precision`: a Precision (its activation dtype), a dtype name, or None for fp32. `tf32`:
    fp32 convolutions run on TF32 tensor cores, as PyTorch lets cuDNN by default on a GPU that
    has them (ops._diffusion.conv_math; the classifier's matmul stays fp32)."""
    kind, depths = _model(name)
    if int(batch_size) < 1 or int(batch_size) != batch_size:
        raise InputError("batch_size", f"must be a whole number >= 1, got {batch_size}", ">= 1")
    if int(image_size) < 32 or int(image_size) != image_size:
        raise InputError("image_size", f"must be a whole number >= 32, got {image_size}",
                         ">= 32 (five stride-2 stages)")
    dtype = _precision(precision)
    b = _Builder(int(batch_size), bytes_per_element(dtype), dtype.value, {},
                 conv_math(dtype, tf32).value)
    size = _conv_bn(b, "stem", 3, 64, int(image_size), 7, 2, relu=True)
    pooled = _out_size(size, 3, 2, 1)
    b.vector("stem", "maxpool", "elementwise", 64, size, reads=1,
             out_elems=b.batch * 64 * pooled * pooled)
    size, channels = pooled, 64
    block, expansion = _BLOCKS[kind]
    for stage, (planes, depth) in enumerate(zip(_STAGE_WIDTHS, depths, strict=True), start=1):
        for i in range(depth):
            stride = 2 if stage > 1 and i == 0 else 1
            size = block(b, f"layer{stage}", channels, planes, size, stride)
            channels = planes * expansion
    b.vector("head", "avgpool", "elementwise", channels, size, reads=1,
             out_elems=b.batch * channels)
    b.linear("head", b.batch, _NUM_CLASSES, channels)
    df = pd.DataFrame(list(b.rows.values()), columns=COLUMNS)
    return df.astype({"b": "int64", "count": "int64", "m": "float64", "n": "float64",
                      "k": "float64"})
