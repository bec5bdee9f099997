"""ONNX import: Conv (plain, strided, depthwise), Gemm and MatMul layers of a small graph."""

import numpy as np
import pytest

from perfcast.accel import get_arch, model_problems, search_mapping
from perfcast.errors import InputError

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _weight(name, *shape):
    return numpy_helper.from_array(np.zeros(shape, dtype=np.float32), name)


@pytest.fixture()
def tiny_cnn(tmp_path):
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], name="stem", strides=[2, 2],
                         pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["a", "w2"], ["b"], name="dw", group=8, pads=[1, 1, 1, 1]),
        helper.make_node("Flatten", ["b"], ["f"]),
        helper.make_node("Gemm", ["f", "w3"], ["y"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])],
        [_weight("w1", 8, 3, 3, 3), _weight("w2", 8, 1, 3, 3), _weight("w3", 10, 512)])
    path = tmp_path / "tiny.onnx"
    onnx.save(helper.make_model(graph), str(path))
    return str(path)


def test_onnx_layers_become_problems(tiny_cnn):
    stem, dw, fc = model_problems(tiny_cnn, batch_size=2)
    assert stem.dims == {"N": 2, "C": 3, "M": 8, "R": 3, "S": 3, "P": 8, "Q": 8}
    assert stem.stride_h == 2
    assert dw.depthwise and dw.dims["M"] == 8 and dw.dims["C"] == 1 and dw.dims["P"] == 8
    assert (fc.dims["P"], fc.dims["C"], fc.dims["M"]) == (2, 512, 10)
    res = search_mapping(get_arch("eyeriss-like"), dw, "energy", max_samples=200)
    assert res.macs == 2 * 8 * 9 * 64


def test_missing_onnx_file(tmp_path):
    with pytest.raises(InputError, match="no such ONNX file"):
        model_problems(str(tmp_path / "none.onnx"))
