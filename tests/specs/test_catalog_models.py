"""Every shipped config parses and prices a prefill and (decoders) a decode step; configs of
architectures perfcast does not model (tests/specs/data/refused) fail naming the field."""

import json
from pathlib import Path

import pytest

from perfcast.compose import step_times
from perfcast.errors import InputError
from perfcast.kernels import default_time_model
from perfcast.ops import Batch, step_ops
from perfcast.specs import ModelSpec, cluster_for, get_device, get_model, model_names

REFUSED = sorted((Path(__file__).parent / "data" / "refused").iterdir())


@pytest.fixture(scope="module")
def box():
    return cluster_for(get_device("h100-sxm"), 1)


def test_catalog_has_at_least_120_models():
    assert len(model_names()) >= 120


@pytest.mark.parametrize("name", model_names())
def test_every_model_prices_a_prefill_and_a_decode_step(name, box):
    spec = get_model(name)
    if spec.image is not None:  # a ViT classifies images: one encoder pass
        tables = [step_ops(spec, Batch(prefill_tokens=(spec.image.tokens,)))]
    else:
        tables = [step_ops(spec, Batch(prefill_tokens=(512,)))]
        if spec.kind == "decoder":
            tables.append(step_ops(spec, Batch(decode_context=(512,) * 8)))
    times = [f.time_s for f in step_times(tables, box, time_model=default_time_model(),
                                          intervals=False)]
    assert all(0 < t < 60 for t in times), times
    if len(times) == 2:  # 512 new tokens cost more than 8 decode tokens
        assert times[0] > times[1]


@pytest.mark.parametrize("folder", REFUSED, ids=lambda p: p.name)
def test_refused_architectures_name_the_field(folder):
    config = json.loads((folder / "config.json").read_text())
    why = json.loads((folder / "provenance.json").read_text())
    with pytest.raises(InputError) as err:
        ModelSpec.from_hf_config(config, folder.name)
    assert err.value.field.startswith("model_config."), why["name"]


def test_a_catalog_spec_is_built_once_per_config_text(tmp_path, monkeypatch):
    """get_model shares one frozen spec per catalog config text, equal to one built from the
    file directly; a changed file is read anew, never answered from the old spec."""
    import shutil

    import perfcast.specs._catalog as catalog

    spec = get_model("llama-2-7b")
    assert get_model("llama-2-7b") is spec
    assert spec == get_model(config_path=catalog._DATA / "models" / "llama-2-7b" / "config.json")
    folder = tmp_path / "data"
    shutil.copytree(str(catalog._DATA), folder)
    monkeypatch.setattr(catalog, "_DATA", folder)
    path = folder / "models" / "llama-2-7b" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "num_hidden_layers": 3}))
    assert get_model("llama-2-7b").num_layers == 3
