"""Files a user hands perfcast are size-limited, parsed safely, and every defect is an
InputError naming the option, never a traceback (hypothesis-fuzzed)."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfcast.errors import InputError, read_user_json, read_user_text
from perfcast.kernels import Calibration
from perfcast.specs import get_model

_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)
_config_keys = st.sampled_from(["hidden_size", "num_hidden_layers", "num_attention_heads",
                                "num_key_value_heads", "intermediate_size", "vocab_size",
                                "model_type", "max_position_embeddings", "n_embd", "n_layer",
                                "num_local_experts", "torch_dtype", "architectures"])
FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_missing_oversized_and_binary_files_are_named(tmp_path):
    with pytest.raises(InputError, match="no file at"):
        read_user_text(tmp_path / "none.json", "calibration", "a calibration")
    big = tmp_path / "big.json"
    big.write_text("{}" + " " * 100)
    with pytest.raises(InputError, match="over the 50-byte limit") as err:
        read_user_text(big, "model_config", "a config.json", max_bytes=50)
    assert err.value.field == "model_config"
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match="cannot read"):
        read_user_text(binary, "spec", "a device spec")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="JSON array, not an object"):
        read_user_json(tmp_path / "list.json", "spec", "a device spec")


@FUZZ
@given(st.dictionaries(_config_keys, _json, max_size=8))
def test_any_model_config_is_a_model_or_a_named_error(tmp_path, config):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    try:
        get_model(None, str(path))
    except InputError as exc:
        assert exc.field.startswith("model_config") or exc.field == "model"


@FUZZ
@given(st.one_of(_json, st.fixed_dictionaries(
    {"schema_version": st.sampled_from([1, 2, 3]), "families": _json, "residuals": _json,
     "devices": _json, "provenance": _json})))
def test_any_calibration_file_loads_or_is_a_named_error(tmp_path, data):
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(data))
    try:
        Calibration.load(path)
    except InputError as exc:
        assert exc.field.startswith("calibration")


_arch_keys = st.sampled_from(["name", "technology", "clock_hz", "word_bits", "levels",
                              "mac_energy_pj", "junk"])


@FUZZ
@given(st.dictionaries(_arch_keys, _json, max_size=6))
def test_any_arch_yaml_is_an_arch_or_a_named_error(tmp_path, data):
    import yaml

    from perfcast.accel import load_arch_yaml

    path = tmp_path / "arch.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        load_arch_yaml(path)
    except InputError as exc:
        assert exc.field.startswith("arch")


@FUZZ
@given(st.one_of(_json, st.dictionaries(st.sampled_from(["h100-sxm", "a100-sxm4-80gb", "h10"]),
                                        _json, max_size=3)))
def test_any_price_file_is_prices_or_a_named_error(tmp_path, data):
    from perfcast.sweep import gpu_prices

    path = tmp_path / "prices.json"
    path.write_text(json.dumps(data))
    try:
        gpu_prices(path)
    except InputError as exc:
        assert exc.field.startswith("prices")
