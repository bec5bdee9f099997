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
        raise InputError("onnx", f"{name}: unequal strides/dilations {stride} {dil}",
                         "square strides and dilations")
    p = (h + pads[0] + pads[2] - dil[0] * (r - 1) - 1) // stride[0] + 1
    q = (w + pads[1] + pads[3] - dil[1] * (s - 1) - 1) // stride[1] + 1
    common = {"n": n, "r": r, "s": s, "p": p, "q": q, "stride": stride[0], "dilation": dil[0]}
    if groups > 1 and c_per_group == 1 and groups == c_in:
        return conv_problem(name, c=1, m=m, depthwise=True, **common)
    return conv_problem(name, c=c_per_group, m=m // groups, count=groups, **common)


def onnx_problems(path: str | Path, batch_size: int = 1) -> list[Problem]:
    """Every Conv, Gemm and weight MatMul of an ONNX graph, in graph order; symbolic
    dimensions (the batch) take `batch_size`."""
    try:
        import onnx
    except ImportError:
        raise InputError("model", "reading ONNX needs the onnx package",
                         "pip install 'perfcast[onnx]'") from None
    path = Path(path)
    if not path.is_file():
        raise InputError("model", f"no such ONNX file {str(path)!r}")
    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    graph = model.graph
    shapes = {v.name: _dims(v, batch_size)
              for v in [*graph.input, *graph.value_info, *graph.output]}
    shapes.update({t.name: list(t.dims) for t in graph.initializer})
    weights = {t.name for t in graph.initializer}
    out = []
    for i, node in enumerate(graph.node):
        name = node.name or f"{node.op_type.lower()}_{i}"
        if node.op_type == "Conv":
            out.append(_conv(node, shapes, name))
        elif node.op_type in ("Gemm", "MatMul") and node.input[1] in weights:
            a, b = shapes[node.input[0]], shapes[node.input[1]]
            if node.op_type == "Gemm" and _attr(node, "transA", 0):
                a = a[::-1]
            k, cols = (b[1], b[0]) if _attr(node, "transB", 0) else (b[0], b[1])
            out.append(gemm_problem(name, m=math.prod(a[:-1]), n=cols, k=k))
    if not out:
        raise InputError("model", f"{path.name} has no Conv, Gemm or weight MatMul node")
    return out
