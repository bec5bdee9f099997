import json
from importlib import resources

import pytest

from perfcast.errors import InputError
from perfcast.specs import (
    cluster_for,
    cluster_names,
    device_names,
    get_cluster,
    get_device,
    get_model,
    model_entries,
    model_names,
)

REQUIRED_GPUS = [
    "v100-pcie-32gb", "p100-pcie-16gb", "p4", "t4", "a10", "a40", "l4", "l40s", "a100-sxm4-40gb",
    "a100-sxm4-80gb", "a100-pcie-40gb", "a100-pcie-80gb", "h100-sxm", "h100-pcie", "h200-sxm",
    "b200-sxm", "b300-sxm", "gb200", "gb300", "mi100", "mi210", "mi250", "mi300x",
]
REQUIRED_MODELS = [
    "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b",
    "mistral-7b", "mixtral-8x7b", "qwen3-32b", "deepseek-v3", "gpt2", "gpt2-medium", "gpt2-large",
    "gpt2-xl", "gpt3-175b", "gpt3-xl", "gpt3-2.7b", "opt-1.3b", "bert-large", "switch-xl4",
]


def test_required_gpus_present():
    assert set(REQUIRED_GPUS) <= set(device_names())


def test_required_models_present():
    assert set(REQUIRED_MODELS) <= set(model_names())


@pytest.mark.parametrize("name", REQUIRED_GPUS)
def test_every_gpu_number_has_a_source(name):
    device = get_device(name)
    dumped = device.model_dump(exclude={"sources", "name", "kind"}, exclude_none=True)
    for field, value in dumped.items():
        if field in ("dense_peak_flops", "matrix_peak_flops"):
            for dtype in value:
                assert f"{field}.{dtype}" in device.sources, (name, field, dtype)
        else:
            assert field in device.sources, (name, field)


@pytest.mark.parametrize("alias,name", [
    ("H100-SXM5-80GB", "h100-sxm"), ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("  a100_sxm4_80gb ", "a100-sxm4-80gb"), ("MI300X", "mi300x"),
])
def test_gpu_aliases(alias, name):
    assert get_device(alias).name == name


@pytest.mark.parametrize("alias,name", [
    ("meta-llama/Llama-2-7b-hf", "llama-2-7b"), ("Llama-2-7B", "llama-2-7b"),
    ("mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b"),
])
def test_model_aliases(alias, name):
    assert get_model(alias).name == name


def test_unknown_names_suggest_close_matches():
    with pytest.raises(InputError) as err:
        get_device("h100-sxn")
    assert err.value.field == "gpu" and "h100-sxm" in str(err.value)
    with pytest.raises(InputError) as err:
        get_model("llama2-7bb")
    assert err.value.field == "model" and "llama-2-7b" in str(err.value)


@pytest.mark.parametrize("entry", model_entries(), ids=lambda e: e["name"])
def test_model_params_match_published(entry):
    """The config's parameter count against the published one, as the entry's
    params_source says it was published: exactly ('published', 3%), by the name's round
    number ('nominal', 6%), without the LM head, or not at all ('computed-from-config')."""
    spec = get_model(entry["name"])
    total, source = spec.total_params() / 1e9, entry["params_source"]
    if source == "computed-from-config":
        assert entry["params_b"] is None or entry["params_b"] == pytest.approx(total, rel=0.03)
        return
    # LLaVA's published count includes the CLIP vision tower, which ModelSpec leaves out.
    expected = 6.74 if entry["name"] == "llava-1.5-7b" else entry["params_b"]
    if any(note.startswith("vision tower") for note in spec.inferred):
        assert 0.85 * expected <= total <= 1.03 * expected  # less the unpriced tower
    elif source == "published-excluding-lm-head":
        assert total - spec.lm_head_params() / 1e9 == pytest.approx(expected, rel=0.03)
    else:
        assert total == pytest.approx(expected, rel={"published": 0.03, "nominal": 0.06}[source])


def test_model_config_path(tmp_path):
    text = (resources.files("perfcast.specs") / "data/models/mistral-7b/config.json").read_text()
    path = tmp_path / "config.json"
    path.write_text(text)
    spec = get_model(config_path=path)
    assert spec.sliding_window == 4096 and spec.num_kv_heads == 8


def test_bad_config_path_is_input_error(tmp_path):
    with pytest.raises(InputError) as err:
        get_model(config_path=tmp_path / "missing.json")
    assert err.value.field == "model_config"
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"model_type": "llama", "vocab_size": 10}))
    with pytest.raises(InputError) as err:
        get_model(config_path=bad)
    assert "hidden_size" in str(err.value)


def test_cluster_presets_scale_nodes():
    assert {"dgx-a100", "dgx-h100", "dgx-h200", "hgx-b200", "gb200-nvl72"} <= set(cluster_names())
    c = get_cluster("dgx-h100", num_gpus=32)
    assert c.num_nodes == 4 and c.num_gpus == 32
    assert c.link_for(8).kind == "nvswitch" and c.link_for(16).kind == "infiniband"
    assert get_cluster("gb200-nvl72", 72).num_nodes == 1


def test_generic_cluster_for_device_without_preset():
    box = cluster_for(get_device("t4"), 2)
    assert box.intra_node.kind == "pcie" and box.device.name == "t4"
