"""Layer tables of CNNs (ResNet-50, VGG-16, MobileNet v1) and a transformer's GEMMs as
Problems, one per layer, named like torchvision's modules. Shapes follow torchvision
(ResNet v1.5: stride on the 3x3 conv), Simonyan & Zisserman (VGG-16, config D) and
Howard et al. 2017 (MobileNet v1, width 1.0, 224²), BERT-base for the transformer."""

from __future__ import annotations

from collections.abc import Callable

from perfcast.accel._onnx import onnx_problems
from perfcast.accel._problem import Problem, conv_problem, gemm_problem
from perfcast.errors import InputError, close_matches

__all__ = ["MODELS", "model_problems"]

_RESNET50_STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # width, blocks, stride
_VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")
# MobileNet v1: (output channels, stride) of each depthwise-separable block
_MOBILENET = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), *[(512, 1)] * 5,
              (1024, 2), (1024, 1))


def _resnet50(n: int) -> list[Problem]:
    out = [conv_problem("conv1", n=n, c=3, m=64, r=7, h=224, stride=2, padding=3)]
    c_in, size = 64, 56  # after the 3x3/2 max-pool
    for stage, (width, blocks, stride) in enumerate(_RESNET50_STAGES, start=1):
        for b in range(blocks):
            s = stride if b == 0 else 1
            name = f"layer{stage}.{b}"
            out.append(conv_problem(f"{name}.conv1", n=n, c=c_in, m=width, r=1, p=size))
            out.append(conv_problem(f"{name}.conv2", n=n, c=width, m=width, r=3, h=size,
                                    stride=s, padding=1))
            out_size = size // s
            out.append(conv_problem(f"{name}.conv3", n=n, c=width, m=4 * width, r=1,
                                    p=out_size))
            if b == 0:
                out.append(conv_problem(f"{name}.downsample", n=n, c=c_in, m=4 * width, r=1,
                                        h=size, stride=s))
            c_in, size = 4 * width, out_size
    return [*out, gemm_problem("fc", m=n, n=1000, k=2048)]


def _vgg16(n: int) -> list[Problem]:
    out, c_in, size, i = [], 3, 224, 0
    for item in _VGG16:
        if item == "M":
            size //= 2
            continue
        out.append(conv_problem(f"features.{i}", n=n, c=c_in, m=int(item), r=3, p=size))
        c_in, i = int(item), i + 1
    fcs = ((25088, 4096), (4096, 4096), (4096, 1000))
    return [*out, *(gemm_problem(f"classifier.{j}", m=n, n=o, k=k)
                    for j, (k, o) in enumerate(fcs))]


def _mobilenet(n: int) -> list[Problem]:
    out = [conv_problem("conv1", n=n, c=3, m=32, r=3, h=224, stride=2, padding=1)]
    c_in, size = 32, 112
    for i, (c_out, stride) in enumerate(_MOBILENET, start=1):
        out.append(conv_problem(f"block{i}.dw", n=n, c=1, m=c_in, r=3, h=size, stride=stride,
                                padding=1, depthwise=True))
        size //= stride
        out.append(conv_problem(f"block{i}.pw", n=n, c=c_in, m=c_out, r=1, p=size))
        c_in = c_out
    return [*out, gemm_problem("fc", m=n, n=1000, k=1024)]


def _bert_base(n: int, seq: int = 512, hidden: int = 768, layers: int = 12) -> list[Problem]:
    """One encoder layer's weight GEMMs (x `layers` via count); attention's own matmuls
    are activation-activation and left out."""
    tokens = n * seq
    shapes = (("qkv", 3 * hidden, hidden), ("attn_out", hidden, hidden),
              ("ffn_up", 4 * hidden, hidden), ("ffn_down", hidden, 4 * hidden))
    return [gemm_problem(name, m=tokens, n=cols, k=k, count=layers) for name, cols, k in shapes]


MODELS: dict[str, Callable[[int], list[Problem]]] = {
    "resnet50": _resnet50, "vgg16": _vgg16, "mobilenet": _mobilenet, "bert-base": _bert_base,
}


def model_problems(name: str, batch_size: int = 1, layer: str | None = None) -> list[Problem]:
    """The layers of a model (a MODELS name or an .onnx file) as Problems, in execution
    order; `layer`: only the layer of that name."""
    if int(batch_size) != batch_size or batch_size < 1:
        raise InputError("batch_size", f"must be a whole number >= 1, got {batch_size}", ">= 1")
    if name.endswith(".onnx"):
        problems = onnx_problems(name, int(batch_size))
    elif name in MODELS:
        problems = MODELS[name](int(batch_size))
    else:
        hint = close_matches(name, MODELS) or list(MODELS)
        raise InputError("model", f"unknown model {name!r}; did you mean {', '.join(hint)}?",
                         [*MODELS, "PATH.onnx"])
    if layer is None:
        return problems
    names = [p.name for p in problems]
    if layer not in names:
        hint = close_matches(layer, names) or names[:5]
        raise InputError("layer", f"{name} has no layer {layer!r}; did you mean "
                         f"{', '.join(hint)}?", f"{len(names)} layers: {', '.join(names[:4])}, ...")
    return [problems[names.index(layer)]]
