"""Scenario files: validated on load with a safe YAML loader; every bad field is named."""

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.errors import InputError
from perfcast.suite import MAX_SCENARIO_BYTES, Scenario, load_scenario, parse_scenario

GOOD = """
id: my-1
title: Llama-2-7B on one A100
command: infer
model: llama-2-7b
hardware: {gpu: a100-sxm4-80gb}
plan: {tp: 1}
workload: {prompt_tokens: 512, output_tokens: 128}
targets:
  - {name: TTFT, path: ttft_s}
"""


def test_sections_flatten_to_the_commands_options():
    s = parse_scenario(GOOD)
    assert s.runs() == {"main": {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb", "tp": 1,
                                 "prompt_tokens": 512, "output_tokens": 128}}


def test_variants_override_and_the_base_is_untouched():
    s = parse_scenario(GOOD + "variants:\n  tp2: {tp: 2}\n  tp4: {tp: 4}\n")
    runs = s.runs()
    assert [r["tp"] for r in runs.values()] == [2, 4]
    assert s.options_for()["tp"] == 1


def test_with_overrides_finds_the_section_or_adds_an_option():
    s = parse_scenario(GOOD).with_overrides({"tp": 4, "hardware.gpu": "h100-sxm",
                                             "kernel_model": "roofline"})
    assert s.plan == {"tp": 4} and s.hardware == {"gpu": "h100-sxm"}
    assert s.options == {"kernel_model": "roofline"}
    with pytest.raises(InputError, match="bogus.tp"):
        s.with_overrides({"bogus.tp": 2})


@pytest.mark.parametrize("edit, field", [
    ("command: infer\n", "targets"),                       # no targets at all
    ("id: 'has space'\n", "id"),
    ("colour: red\n", "colour"),
    ("targets: [{name: x, path: 'a b'}]\n", "targets.0.path"),
    ("plan: {tp: {nested: 1}}\n", "plan.tp"),
])
def test_bad_fields_are_named(edit, field):
    data = yaml.safe_load(GOOD)
    data.update(yaml.safe_load(edit))
    if field == "targets":
        del data["targets"]
    with pytest.raises(InputError) as err:
        parse_scenario(yaml.safe_dump(data), origin="f.yaml")
    assert err.value.field.startswith(field)
    assert "f.yaml" in str(err.value)


def test_a_target_naming_a_missing_variant_is_refused():
    text = GOOD + "variants: {a: {tp: 2}}\n" + \
        "  \ntargets: [{name: s, path: ttft_s, variant: a, baseline: b}]\n"
    with pytest.raises(InputError, match="unknown baseline 'b'"):
        parse_scenario(text.replace("targets:\n  - {name: TTFT, path: ttft_s}\n", ""))


def test_a_key_in_two_sections_is_an_error():
    s = parse_scenario(GOOD.replace("plan: {tp: 1}", "plan: {gpu: h100-sxm}"))
    with pytest.raises(InputError, match="plan.gpu"):
        s.runs()


def test_yaml_cannot_run_code():
    evil = GOOD + "notes: !!python/object/apply:os.system ['echo pwned']\n"
    with pytest.raises(InputError, match="not valid YAML"):
        parse_scenario(evil)


def test_size_limit_and_missing_file(tmp_path):
    with pytest.raises(InputError, match="larger than"):
        parse_scenario(GOOD + "notes: '" + "x" * MAX_SCENARIO_BYTES + "'\n")
    with pytest.raises(InputError, match="no file at"):
        load_scenario(tmp_path / "nope.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(InputError, match="mapping"):
        load_scenario(tmp_path / "list.yaml")


_values = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                    st.text(max_size=8), st.lists(st.integers(), max_size=3),
                    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(list(Scenario.model_fields) + ["junk"]), _values,
                       max_size=8))
def test_any_mapping_is_a_scenario_or_a_named_input_error(data):
    base = yaml.safe_load(GOOD)
    base.update(data)
    try:
        parse_scenario(yaml.safe_dump(base))
    except InputError as exc:
        assert exc.field
