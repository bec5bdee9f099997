"""Eager kernels of ViTForImageClassification: patch embedding, pre-LN encoder without a
mask, final LayerNorm and the classifier on the class token."""

import pytest

from perfcast.errors import InputError
from perfcast.ops import eager_ops
from perfcast.specs import get_model


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_vit_b16_forward_is_35_gflops_per_image(attention):
    ops = eager_ops(get_model("vit-b16"), 4, 197, attention=attention)
    gflops = (ops["flops"] * ops["count"]).sum() / 4 / 1e9
    assert gflops == pytest.approx(35.2, rel=0.01)  # 17.6 GMACs (Dosovitskiy et al. 2021)
    ops = ops.set_index("op")
    assert ops.loc["linear:patch_embed", ["m", "n", "k"]].tolist() == [4 * 196, 768, 768]
    assert ops.loc["linear:classifier", ["m", "n", "k"]].tolist() == [4, 1000, 768]
    assert not any(o.startswith(("add:mask", "embedding:")) for o in ops.index)


def test_vit_sequence_is_fixed_by_the_image():
    with pytest.raises(InputError) as err:
        eager_ops(get_model("vit-b16"), 1, 196)
    assert err.value.field == "seq_len"
