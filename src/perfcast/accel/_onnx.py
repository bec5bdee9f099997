"""Layers of any CNN from an ONNX file: Conv (grouped and depthwise), Gemm and MatMul with a
weight initializer, as Problems. Needs the optional `onnx` package (imported only here)."""

from __future__ import annotations

import math
from pathlib import Path

from perfcast.accel._problem import Problem, conv_problem, gemm_problem
from perfcast.errors import InputError

__all__ = ["onnx_problems"]


def _dims(value_info, batch_size: int) -> list[int]:
    dims = value_info.type.tensor_type.shape.dim
    return [d.dim_value if d.HasField("dim_value") else batch_size for d in dims]


def _attr(node, name: str, default):
    import onnx

    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _conv(node, shapes: dict[str, list[int]], name: str) -> Problem:
    n, c_in, h, w = shapes[node.input[0]]
    m, c_per_group, r, s = shapes[node.input[1]]
    groups = int(_attr(node, "group", 1))
    stride = list(_attr(node, "strides", [1, 1]))
    dil = list(_attr(node, "dilations", [1, 1]))
    pads = list(_attr(node, "pads", [0, 0, 0, 0]))
    if stride[0] != stride[1] or dil[0] != dil[1]:
        raise InputError("model", f"{name}: unequal strides/dilations {stride} {dil}",
                         "square strides and dilations")
    p = (h + pads[0] + pads[2] - dil[0] * (r - 1) - 1) // stride[0] + 1
    q = (w + pads[1] + pads[3] - dil[1] * (s - 1) - 1) // stride[1] + 1
    common = {"n": n, "r": r, "s": s, "p": p, "q": q, "stride": stride[0], "dilation": dil[0]}
    if groups > 1 and c_per_group == 1 and groups == c_in:
        return conv_problem(name, c=1, m=m, depthwise=True, **common)
    return conv_problem(name, c=c_per_group, m=m // groups, count=groups, **common)


_EXPECTED = "an ONNX model file (e.g. from torch.onnx.export)"


def _load(path: Path):
    """The ONNX graph of `path` with inferred shapes; a file that is not one (truncated,
    another format, an inconsistent graph) is an InputError naming --model."""
    try:
        import onnx
        from google.protobuf.message import DecodeError
    except ImportError:
        raise InputError("model", "reading ONNX needs the onnx package",
                         "pip install 'perfcast[onnx]'") from None
    if not path.is_file():
        raise InputError("model", f"no such ONNX file {str(path)!r}")
    try:
        return onnx.shape_inference.infer_shapes(onnx.load(str(path))).graph
    except DecodeError:
        raise InputError("model", f"{path} is not an ONNX model (not a readable ONNX "
                         "protobuf: truncated, or another format)", _EXPECTED) from None
    except (OSError, ValueError, onnx.shape_inference.InferenceError) as exc:
        reason = (str(exc).strip().splitlines() or ["unreadable"])[0]
        raise InputError("model", f"{path} is not a valid ONNX model ({reason})",
                         _EXPECTED) from None


def _node_problem(node, shapes: dict[str, list[int]], weights: set[str], name: str
                  ) -> Problem | None:
    """The Problem of one Conv, Gemm or weight MatMul node (None for any other node)."""
    if node.op_type == "Conv":
        return _conv(node, shapes, name)
    if node.op_type in ("Gemm", "MatMul") and node.input[1] in weights:
        a, b = shapes[node.input[0]], shapes[node.input[1]]
        if node.op_type == "Gemm" and _attr(node, "transA", 0):
            a = a[::-1]
        k, cols = (b[1], b[0]) if _attr(node, "transB", 0) else (b[0], b[1])
        return gemm_problem(name, m=math.prod(a[:-1]), n=cols, k=k)
    return None


def onnx_problems(path: str | Path, batch_size: int = 1) -> list[Problem]:
    """Every Conv, Gemm and weight MatMul of an ONNX graph, in graph order; symbolic
    dimensions (the batch) take `batch_size`."""
    path = Path(path)
    graph = _load(path)
    shapes = {v.name: _dims(v, batch_size)
              for v in [*graph.input, *graph.value_info, *graph.output]}
    shapes.update({t.name: list(t.dims) for t in graph.initializer})
    weights = {t.name for t in graph.initializer}
    out = []
    for i, node in enumerate(graph.node):
        name = node.name or f"{node.op_type.lower()}_{i}"
        try:
            problem = _node_problem(node, shapes, weights, name)
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            if isinstance(exc, InputError):
                raise
            raise InputError("model", f"{path.name}: {node.op_type} node {name!r} has inputs "
                             "of unknown or unexpected shape", _EXPECTED) from None
        if problem is not None:
            out.append(problem)
    if not out:
        raise InputError("model", f"{path.name} has no Conv, Gemm or weight MatMul node")
    return out
