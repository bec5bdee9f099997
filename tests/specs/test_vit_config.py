"""ViT-B/16 (google/vit-base-patch16-224) from the catalog and from any ViT config.json."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfcast.errors import InputError
from perfcast.specs import ModelSpec, get_model


def test_vit_b16_parses_as_an_encoder_over_197_tokens():
    m = get_model("google/vit-base-patch16-224")
    assert m.name == "vit-b16" and m.kind == "encoder" and m.model_type == "vit"
    assert (m.hidden_size, m.num_layers, m.num_heads, m.intermediate_size) == (768, 12, 12,
                                                                              3072)
    assert m.image.tokens == 197 == m.max_position_embeddings and m.vocab_size == 1000
    assert m.total_params() / 1e6 == pytest.approx(86.6, rel=0.01)


@given(st.sampled_from([8, 14, 16, 32]), st.integers(1, 12))
def test_tokens_are_patches_plus_the_class_token(patch, side):
    cfg = {"model_type": "vit", "image_size": patch * side, "patch_size": patch}
    m = ModelSpec.from_hf_config(cfg, "vit")
    assert m.image.tokens == side * side + 1 and m.vocab_size == 2  # PretrainedConfig's 2


@pytest.mark.parametrize(("cfg", "field"), [
    ({"image_size": 224, "patch_size": 15}, "model_config.patch_size"),
    ({"image_size": 0}, "model_config.image_size")])
def test_bad_image_geometry_is_refused(tmp_path, cfg, field):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "vit", **cfg}))
    with pytest.raises(InputError) as err:
        get_model(config_path=path)
    assert err.value.field == field
