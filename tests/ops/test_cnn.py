"""Eager op tables of torchvision ResNets: published MAC counts, vocabulary, clear errors."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.errors import InputError
from perfcast.ops import CNN_MODELS, COLUMNS, cnn_ops
from perfcast.specs import Precision


def _gmacs(ops):
    dense = ops[ops["family"].isin(["conv", "gemm"])]
    return float((dense["flops"] * dense["count"]).sum()) / 2e9


# torchvision's model cards: GFLOPS counted as multiply-accumulates at 224x224, batch 1
@pytest.mark.parametrize(("name", "gmacs"), [
    ("resnet18", 1.81), ("resnet34", 3.66), ("resnet50", 4.09), ("resnet101", 7.80),
    ("resnet152", 11.51)])
def test_macs_match_published_counts(name, gmacs):
    assert _gmacs(cnn_ops(name, 1)) == pytest.approx(gmacs, rel=0.01)


def test_resnet18_has_torchvision_kernels_in_eager_vocabulary():
    ops = cnn_ops("resnet18", 1)
    assert list(ops.columns) == COLUMNS
    launched = ops.groupby("op")["count"].sum().to_dict()
    # 20 convs (17 3x3/7x7 + 3 downsample), a bn per conv, 17 relus, 8 residual adds
    assert launched == {"conv": 20, "bn": 20, "relu": 17, "add": 8, "maxpool": 1,
                        "avgpool": 1, "linear": 1}
    fams = dict(zip(ops["op"], ops["family"], strict=False))
    assert fams == {"conv": "conv", "bn": "norm", "relu": "activation", "add": "elementwise",
                    "maxpool": "elementwise", "avgpool": "elementwise", "linear": "gemm"}
    stem = ops.iloc[0]
    assert (stem["op"], stem["m"], stem["n"], stem["k"]) == ("conv", 112 * 112, 64, 3 * 7 * 7)
    fc = ops[ops["op"] == "linear"].iloc[0]
    assert (fc["m"], fc["n"], fc["k"]) == (1, 1000, 512)
    assert set(ops["dtype"]) == {"fp32"}
    assert (ops["bytes_read"] > 0).all() and (ops["bytes_written"] > 0).all()


def test_resnet50_uses_bottlenecks():
    ops = cnn_ops("resnet50", 1)
    launched = ops.groupby("op")["count"].sum()
    assert launched["conv"] == 53 and launched["add"] == 16  # 16 blocks x 3 + 4 downsample + stem


def test_precision_sets_dtype_and_bytes():
    fp32 = cnn_ops("resnet18", 2)
    bf16 = cnn_ops("resnet18", 2, precision=Precision.uniform("bf16"))
    assert set(bf16["dtype"]) == {"bf16"}
    assert bf16["bytes_read"].sum() == pytest.approx(fp32["bytes_read"].sum() / 2)
    assert cnn_ops("resnet18", 2, precision="fp16")["flops"].sum() == fp32["flops"].sum()


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(CNN_MODELS), batch=st.integers(1, 64),
       image=st.integers(32, 512))
def test_work_grows_with_batch(name, batch, image):
    small, big = cnn_ops(name, batch, image), cnn_ops(name, batch + 1, image)
    for col in ("flops", "bytes_read", "bytes_written"):
        assert (big[col] * big["count"]).sum() > (small[col] * small["count"]).sum()
    assert big["count"].sum() == small["count"].sum()  # same kernels, bigger


@pytest.mark.parametrize(("kwargs", "field", "says"), [
    ({"name": "resnet-19", "batch_size": 1}, "model", "resnet18"),
    ({"name": "vgg16", "batch_size": 1}, "model", "resnet50"),
    ({"name": "resnet18", "batch_size": 0}, "batch_size", ">= 1"),
    ({"name": "resnet18", "batch_size": 1, "image_size": 16}, "image_size", ">= 32"),
    ({"name": "resnet18", "batch_size": 1, "precision": "fp7"}, "precision", "fp32"),
])
def test_bad_input_names_the_field_and_what_is_allowed(kwargs, field, says):
    with pytest.raises(InputError) as err:
        cnn_ops(**kwargs)
    assert err.value.field == field
    assert says in str(err.value)


def test_names_are_forgiving_about_case_and_dashes():
    assert cnn_ops("ResNet-18", 1).equals(cnn_ops("resnet18", 1))
