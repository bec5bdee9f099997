"""Files a user hands perfcast: unreadable, binary, malformed, a folder, a key given twice,
absurd sizes: each is one line naming the option (exit 2), never a traceback, a hang or a
silently kept last value."""

import json

import pytest
from typer.testing import CliRunner

from perfcast.cli import app
from perfcast.specs import load_model_config

runner = CliRunner()

INFER = ["infer", "--gpu", "h100-sxm"]


def _refused(args, option: str, *words: str) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    line = res.stderr.strip()
    assert line.startswith(f"error: {option}") and "\n" not in line, line
    for word in words:
        assert word in line, line
    assert "Error:" not in line and "<class" not in line
    return line


@pytest.fixture
def files(tmp_path):
    (tmp_path / "binary.json").write_bytes(b"\x00\x01\xff\xfe")
    (tmp_path / "broken.json").write_text('{"hidden_size": 8,\n')
    (tmp_path / "array.json").write_text("[1, 2]")
    (tmp_path / "folder.json").mkdir()
    return tmp_path


def test_model_config_folder_binary_and_invalid_json(files):
    for name, words in (("folder.json", ["is a folder"]), ("binary.json", ["not UTF-8"]),
                        ("broken.json", ["not valid JSON", "line 2"]),
                        ("array.json", ["JSON array, not an object"])):
        _refused([*INFER, "--model-config", str(files / name)], "model_config", *words)


def test_a_duplicate_json_key_is_refused_with_its_line(tmp_path):
    config = load_model_config("gpt2")
    text = json.dumps(config, indent=1)
    dup = text.replace('\n "n_layer":', '\n "n_layer": 2,\n "n_layer":', 1)
    assert dup != text
    (tmp_path / "config.json").write_text(dup)
    line = _refused([*INFER, "--model-config", str(tmp_path / "config.json")], "model_config",
                    "'n_layer' is given twice")
    second = dup.splitlines().index(' "n_layer": 2,') + 2  # the line after the first
    assert f"(line {second})" in line
    nested = '{"a": {"k": 1}, "b": {"k": 2, "x": {"k": 3}},\n "b": 1}'
    (tmp_path / "cal.json").write_text(nested)  # the same key in different objects is fine
    _refused([*INFER, "--model", "gpt2", "--calibration", str(tmp_path / "cal.json")],
             "calibration", "'b' is given twice", "(line 2)")


def test_a_duplicate_yaml_key_in_a_scenario_is_refused_with_its_line(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("id: mine\ntitle: t\ncommand: infer\nmodel: gpt2\nhardware: {gpu: h100-sxm}\n"
                 "workload:\n  prompt_tokens: 512\n  prompt_tokens: 2048\n"
                 "targets: [{name: TTFT, path: ttft_s}]\n")
    _refused(["run", str(f)], "file", "'prompt_tokens' is given twice", "(line 8)")


def test_calibration_that_is_not_one_has_no_python_names(files):
    line = _refused([*INFER, "--model", "gpt2", "--calibration", str(files / "array.json")],
                    "calibration")
    assert "AttributeError" not in line and "list" not in line
    (files / "empty.json").write_text("{}")
    _refused([*INFER, "--model", "gpt2", "--calibration", str(files / "empty.json")],
             "calibration")


def test_a_corrupt_onnx_file(tmp_path):
    pytest.importorskip("onnx")
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not an onnx file at all\n")
    _refused(["accel", "--model", str(bad)], "model", "not an ONNX model")


@pytest.mark.parametrize(("key", "value", "field", "bound"), [
    ("n_layer", 10**9, "num_layers", "10000"),
    ("n_embd", 2**40, "hidden_size", "1048576"),
    ("vocab_size", 10**12, "vocab_size", "16777216"),
])
def test_absurd_sizes_are_refused_with_the_bound_not_forecast(tmp_path, key, value, field,
                                                              bound):
    config = load_model_config("gpt2") | {key: value}
    (tmp_path / "config.json").write_text(json.dumps(config))
    _refused([*INFER, "--model-config", str(tmp_path / "config.json")],
             f"model_config.{field}", bound)


@pytest.mark.parametrize(("change", "field"), [
    ({"text_config": "llama", "hidden_size": None}, "model_config.text_config"),
    ({"kv_lora_rank": 512}, "model_config.qk_nope_head_dim"),
    ({"vocab_size": None}, "model_config.vocab_size"),
])
def test_malformed_config_sections_name_the_key_not_a_python_error(tmp_path, change, field):
    config = {k: v for k, v in (load_model_config("llama-2-7b") | change).items()
              if v is not None}
    (tmp_path / "config.json").write_text(json.dumps(config))
    line = _refused([*INFER, "--model-config", str(tmp_path / "config.json")], f"{field}:")
    for internal in ("AttributeError", "TypeError", "KeyError", "object has no attribute"):
        assert internal not in line


def test_calibrate_with_a_corrupt_table_or_an_incomplete_device_spec(tmp_path):
    (tmp_path / "m.parquet").write_bytes(b"not parquet")
    _refused(["calibrate", "--measurements", str(tmp_path / "m.parquet"), "--device", "h100-sxm",
              "--out", str(tmp_path / "c.json")], "measurements", "cannot read")
    (tmp_path / "m.csv").write_text("device\nx\n")
    (tmp_path / "dev.json").write_text('{"name": "x"}')
    _refused(["calibrate", "--measurements", str(tmp_path / "m.csv"), "--device-spec",
              str(tmp_path / "dev.json"), "--device", "x", "--out", str(tmp_path / "c.json")],
             "device_spec.")
