"""Fusion-aware CNN kernels (compose.fuse_cnn_kernels): batch norms fold into the convs,
ReLUs into the kernel before them; FLOPs are conserved and only the folded kernels' bytes
disappear."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.compose import fuse_cnn_kernels, step_time
from perfcast.errors import InputError
from perfcast.ops import CNN_MODELS, cnn_ops
from perfcast.specs import cluster_for, get_device


def _total(ops, column):
    return float((ops[column] * ops["count"]).sum())


@given(name=st.sampled_from(CNN_MODELS), batch=st.integers(1, 8))
@settings(max_examples=15, deadline=None)
def test_flops_are_conserved_and_only_folded_traffic_disappears(name, batch):
    ops = cnn_ops(name, batch)
    fused = fuse_cnn_kernels(ops)
    assert _total(fused, "flops") == pytest.approx(_total(ops, "flops"), rel=1e-12)
    folded = ops[ops["op"].isin(["bn", "relu"])]
    moved = _total(folded, "bytes_read") + _total(folded, "bytes_written")
    before = _total(ops, "bytes_read") + _total(ops, "bytes_written")
    after = _total(fused, "bytes_read") + _total(fused, "bytes_written")
    assert before - after == pytest.approx(moved, rel=1e-12)
    # one launch per conv, add, pool and the classifier; no bn or relu kernel is left
    assert fused["count"].sum() == ops["count"].sum() - folded["count"].sum()
    assert not fused["op"].isin(["bn", "relu"]).any()


def test_resnet18_launches_31_kernels_instead_of_68():
    """20 convs + 8 residual adds + maxpool + avgpool + fc; eager also runs 20 bn and 17
    relu kernels (one after each block's first conv, one after each add, one in the stem)."""
    ops = cnn_ops("resnet18", 1)
    assert ops["count"].sum() == 68 and fuse_cnn_kernels(ops)["count"].sum() == 31


@pytest.mark.parametrize("gpu", ["a100-sxm4-80gb", "t4"])
def test_fused_graph_is_never_slower(gpu):
    cluster = cluster_for(get_device(gpu), 1)
    for name in ("resnet18", "resnet50"):
        ops = cnn_ops(name, 4)
        eager = step_time(ops, cluster, "eager").time_s
        fused = step_time(fuse_cnn_kernels(ops), cluster, "eager").time_s
        assert fused < eager


def test_training_tables_keep_their_batch_norms():
    ops = cnn_ops("resnet18", 2).assign(phase="backward")
    with pytest.raises(InputError) as e:
        fuse_cnn_kernels(ops)
    assert e.value.field == "ops"
