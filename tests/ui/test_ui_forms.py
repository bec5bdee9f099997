"""The UI's pure logic: options from widget values, the command line, the scenario YAML,
sweep grids, and the payload -> display transformations."""

import json
import shlex

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from perfcast.api import run_options
from perfcast.cli import app
from perfcast.errors import InputError
from perfcast.ui import (
    MAX_SWEEP_POINTS,
    breakdown_frame,
    build_options,
    cdf_frame,
    cli_line,
    flatten_scenario,
    forecast,
    headline,
    latency_frame,
    memory_frame,
    parse_values,
    run_grid,
    scenario,
    scenario_yaml,
    sweep_frame,
    sweep_points,
)
from perfcast.ui._forms import SECTION_KEYS

INFER = {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb", "tp": 1, "prompt_tokens": 256,
         "output_tokens": 32, "batch": 1, "dtype": "bf16"}
SERVE = {"model": "llama-2-7b", "cluster": "dgx-a100", "tp": 2, "replicas": 1, "qps": 2.0,
         "num_requests": 30, "prompt_tokens": "256", "output_tokens": "32",
         "scheduler": "sarathi", "dtype": "bf16"}
TRAIN = {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb", "num_gpus": 8, "tp": 2, "pp": 1,
         "zero": 1, "recompute": "none", "seq_len": 2048, "micro_batch": 1, "dtype": "bf16"}


def payload_of(command, options):
    """What `perfcast <command> ... --json` prints, through the API."""
    return run_options(command, options).payload()


@pytest.fixture(scope="module")
def infer_payload():
    return payload_of("infer", INFER)


@pytest.fixture(scope="module")
def train_payload():
    return payload_of("train", TRAIN)


def test_build_options_drops_unset_values_and_keeps_section_order():
    options = build_options("infer", "llama-2-7b", {"gpu": "a100-sxm4-80gb"}, {"tp": 1},
                            {"prompt_tokens": 256, "output_tokens": 32, "batch": 1},
                            {"dtype": "bf16", "weight_dtype": None})
    assert options == INFER
    assert list(options) == list(INFER)


def test_build_options_gives_serve_its_length_specs_as_text():
    options = build_options("serve", "llama-2-7b", {"cluster": "dgx-a100"},
                            {"tp": 2, "replicas": 1},
                            {"qps": 2.0, "num_requests": 30, "prompt_tokens": 256,
                             "output_tokens": 32}, {"scheduler": "sarathi", "dtype": "bf16"})
    assert options == SERVE


@pytest.mark.parametrize(("hardware", "field"), [
    ({"gpu": "a100-sxm4-80gb", "cluster": "dgx-a100"}, "hardware"), ({}, "hardware")])
def test_build_options_needs_exactly_one_kind_of_hardware(hardware, field):
    with pytest.raises(InputError) as err:
        build_options("infer", "llama-2-7b", hardware, {}, {})
    assert err.value.field == field


def test_build_options_names_a_missing_model_and_an_unknown_task():
    with pytest.raises(InputError, match="model"):
        build_options("infer", "", {"gpu": "t4"}, {}, {})
    with pytest.raises(InputError, match="task"):
        build_options("bogus", "gpt2", {"gpu": "t4"}, {}, {})


def test_cli_line_spells_flags_as_the_cli_does():
    line = cli_line("serve", {"model": "llama-2-7b", "prefix_cache": True,
                              "host_overlap": False, "colocate": ["gpt2", "opt-1.3b"]})
    assert line == ("perfcast serve --model llama-2-7b --prefix-cache --no-host-overlap "
                    "--colocate gpt2 --colocate opt-1.3b --json")


@pytest.mark.parametrize(("command", "options"), [("infer", INFER), ("train", TRAIN)])
def test_cli_line_prints_the_numbers_the_page_shows(command, options):
    words = shlex.split(cli_line(command, options))
    assert words[0] == "perfcast"
    result = CliRunner().invoke(app, words[1:])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed == payload_of(command, options)


@pytest.mark.parametrize(("command", "options"),
                         [("infer", INFER), ("serve", SERVE), ("train", TRAIN)])
def test_scenario_yaml_round_trips_to_the_same_options(command, options):
    text = scenario_yaml(command, options)
    data = yaml.safe_load(text)
    assert flatten_scenario(data) == (command, options)
    assert data["model"] == "llama-2-7b"
    assert data["plan"]["tp"] == options["tp"]
    assert "gpu" in data["hardware"] or "cluster" in data["hardware"]
    assert data["targets"] and all(t["path"] for t in data["targets"])


@pytest.mark.parametrize(("command", "options"), [("infer", INFER), ("serve", SERVE)])
def test_scenario_yaml_reads_as_a_suite_scenario(command, options):
    suite = pytest.importorskip("perfcast.suite._schema")
    parsed = suite.parse_scenario(scenario_yaml(command, options))
    assert parsed.command == command
    assert parsed.options_for() == options


def test_scenario_targets_name_metrics_the_payload_has(infer_payload):
    for target in scenario("infer", INFER)["targets"]:
        assert isinstance(infer_payload[target["path"]], float)


_KEYS = st.sampled_from(sorted({k for keys in SECTION_KEYS.values() for k in keys}
                               | {"dtype", "kv_dtype", "scheduler", "spec_k"}))
_VALUES = st.one_of(st.integers(-10**6, 10**6), st.booleans(), st.text(max_size=20),
                    st.floats(allow_nan=False, allow_infinity=False), st.none(),
                    st.lists(st.text(max_size=8), max_size=3))


@given(st.dictionaries(_KEYS, _VALUES, max_size=10), st.sampled_from(["infer", "serve"]))
def test_any_options_round_trip_through_safe_yaml(extra, command):
    options = {"model": "gpt2", **extra}
    assert flatten_scenario(yaml.safe_load(scenario_yaml(command, options))) == (
        command, options)


def test_flatten_scenario_names_a_bad_section():
    with pytest.raises(InputError) as err:
        flatten_scenario({"command": "infer", "model": "gpt2", "plan": [1, 2]})
    assert err.value.field == "plan"
    with pytest.raises(InputError) as err:
        flatten_scenario({"command": "infer", "model": "gpt2", "plan": {"tp": 1},
                          "options": {"tp": 2}})
    assert err.value.field == "options.tp"


def test_parse_values_reads_typed_lists_and_names_the_field():
    assert parse_values("tp", " 1, 2,4 ", int) == [1, 2, 4]
    assert parse_values("qps", "0.5,2", float) == [0.5, 2.0]
    for text in ("1,two", "", "2,2"):
        with pytest.raises(InputError) as err:
            parse_values("tp", text, int)
        assert err.value.field == "tp"


def test_sweep_points_cross_two_axes_first_axis_slowest():
    points = sweep_points(INFER, [("tp", [1, 2]), ("batch", [1, 4, 16])])
    assert [(p["tp"], p["batch"]) for p in points] == [
        (1, 1), (1, 4), (1, 16), (2, 1), (2, 4), (2, 16)]
    assert all(p["model"] == "llama-2-7b" for p in points)


def test_sweep_points_swap_cluster_for_a_swept_gpu_and_cap_the_grid():
    points = sweep_points(SERVE, [("gpu", ["h100-sxm", "a100-sxm4-80gb"])])
    assert [p["gpu"] for p in points] == ["h100-sxm", "a100-sxm4-80gb"]
    assert all("cluster" not in p for p in points)
    with pytest.raises(InputError, match=str(MAX_SWEEP_POINTS)):
        sweep_points(INFER, [("tp", list(range(1, 6))), ("batch", [1, 2, 4, 8])])
    with pytest.raises(InputError, match="two different"):
        sweep_points(INFER, [("tp", [1]), ("tp", [2])])


def test_headline_formats_as_the_cli_table(infer_payload):
    shown = dict(headline("infer", infer_payload))
    assert shown["TTFT"] == f"{infer_payload['ttft_s'] * 1e3:.3f} ms"
    assert shown["TPOT"] == f"{infer_payload['tpot_s'] * 1e3:.3f} ms"
    assert shown["End-to-end"] == f"{infer_payload['e2e_s'] * 1e3:.1f} ms"
    assert shown["Throughput"] == f"{infer_payload['throughput_tok_s']:,.1f} tok/s"


def test_infer_breakdown_accounts_for_the_whole_request(infer_payload):
    frame = breakdown_frame("infer", infer_payload)
    assert set(frame["phase"]) == {"prefill", "decode"}
    assert frame["ms"].sum() == pytest.approx(infer_payload["e2e_s"] * 1e3, rel=1e-6)
    memory = memory_frame("infer", infer_payload)
    total = infer_payload["memory_bytes"]["total_bytes"] / 1e9
    assert memory["GB"].sum() == pytest.approx(total, rel=1e-9)


def test_train_breakdown_parts_sum_to_the_iteration(train_payload):
    frame = breakdown_frame("train", train_payload)
    assert "compute" in set(frame["part"])
    assert frame["ms"].sum() == pytest.approx(train_payload["iteration_time_s"] * 1e3, rel=1e-6)
    assert frame["share"].sum() == pytest.approx(1.0, rel=1e-6)
    shown = dict(headline("train", train_payload))
    assert shown["MFU"] == f"{train_payload['mfu']:.1%}"


def test_serve_forecast_carries_the_requests_behind_its_percentiles():
    result = forecast("serve", SERVE)
    requests = result.requests
    assert len(requests) == SERVE["num_requests"] == result.payload["num_requests"]
    for key in ("ttft_s", "tpot_s"):
        stats = result.payload[key]
        assert np.percentile(requests[key], 50) == pytest.approx(stats["p50"], rel=1e-9)
        cdf = cdf_frame(requests, key)
        assert len(cdf) == requests[key].notna().sum()
        assert cdf["ms"].is_monotonic_increasing
        assert cdf["fraction"].iloc[-1] == 1.0
    latency = latency_frame(result.payload)
    assert latency.loc["TTFT", "p99"] == pytest.approx(result.payload["ttft_s"]["p99"] * 1e3)
    assert "out" not in result.options


def test_run_grid_keeps_going_past_a_refused_point():
    points = sweep_points(INFER, [("tp", [1, 3])])
    seen = []
    results = run_grid("infer", points, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 2), (2, 2)]
    frame = sweep_frame("infer", ["tp"], results)
    assert list(frame["tp"]) == [1, 3]
    assert frame.loc[0, "error"] == ""
    assert frame.loc[0, "TTFT (ms)"] == pytest.approx(results[0][1]["ttft_s"] * 1e3)
    assert frame.loc[1, "error"].startswith("tp:")
    assert frame["TTFT (ms)"].isna().tolist() == [False, True]
