"""The page, headless (Streamlit's AppTest): widgets in, the CLI's numbers out."""

import os

import pytest
import yaml

from perfcast.api import run_options
from perfcast.ui import APP_PATH, flatten_scenario

try:  # the `ui` extra, in `.[dev]`: skipped off CI without it, a failure under CI
    from streamlit.testing.v1 import AppTest
except ImportError:
    if os.environ.get("CI"):
        raise
    pytest.skip("streamlit is not installed (pip install -e '.[ui]')", allow_module_level=True)


def payload_of(command, options):
    """What `perfcast <command> ... --json` prints, through the API."""
    return run_options(command, options).payload()


def _page() -> AppTest:
    at = AppTest.from_file(str(APP_PATH), default_timeout=90)
    at.run()
    assert not at.exception
    return at


def _shown(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_infer_forecast_shows_the_cli_numbers():
    at = _page()
    at.selectbox(key="model").set_value("mistral-7b")
    at.selectbox(key="gpu").set_value("h100-sxm")
    at.number_input(key="tp").set_value(2)
    at.number_input(key="prompt_tokens").set_value(1024)
    at.number_input(key="output_tokens").set_value(64)
    at.run()
    at.button(key="forecast").click().run()
    assert not at.exception and not at.error
    p = payload_of("infer", {"model": "mistral-7b", "gpu": "h100-sxm", "tp": 2,
                              "prompt_tokens": 1024, "output_tokens": 64})
    shown = _shown(at)
    assert shown["TTFT"] == f"{p['ttft_s'] * 1e3:.3f} ms"
    assert shown["TPOT"] == f"{p['tpot_s'] * 1e3:.3f} ms"
    assert shown["End-to-end"] == f"{p['e2e_s'] * 1e3:.1f} ms"
    assert shown["Throughput"] == f"{p['throughput_tok_s']:,.1f} tok/s"
    assert shown["Memory per GPU"] == f"{p['memory_bytes']['total_bytes'] / 1e9:.2f} GB"
    breakdown = at.dataframe[0].value
    assert breakdown["ms"].sum() == pytest.approx(p["e2e_s"] * 1e3, rel=1e-6)


def test_serve_and_train_show_their_metrics():
    at = _page()
    at.radio(key="task").set_value("Serving simulation").run()
    at.number_input(key="num_requests").set_value(40)
    at.number_input(key="qps").set_value(4.0)
    at.run()
    at.button(key="forecast").click().run()
    assert not at.exception and not at.error
    p = payload_of("serve", {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb", "qps": 4.0,
                              "num_requests": 40, "prompt_tokens": "512",
                              "output_tokens": "128", "dtype": "bf16"})
    shown = _shown(at)
    assert shown["TTFT p50"] == f"{p['ttft_s']['p50'] * 1e3:.1f} ms"
    assert shown["TPOT p99"] == f"{p['tpot_s']['p99'] * 1e3:.1f} ms"
    assert shown["Throughput"] == f"{p['throughput_tok_s']:.0f} tok/s"
    assert any(df.value.shape == (40, df.value.shape[1]) for df in at.dataframe)  # requests

    at.radio(key="task").set_value("Training iteration").run()
    at.button(key="forecast").click().run()
    assert not at.exception and not at.error
    tp = at.number_input(key="tp").value
    t = payload_of("train", {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb", "num_gpus": 8,
                              "tp": tp, "zero": 1, "seq_len": 2048})
    shown = _shown(at)
    assert shown["Iteration"] == f"{t['iteration_time_s']:.3f} s"
    assert shown["Tokens/s"] == f"{t['tokens_per_s']:,.0f}"
    assert shown["MFU"] == f"{t['mfu']:.1%}"


def test_bad_input_is_one_error_line_naming_the_field():
    at = _page()
    at.number_input(key="tp").set_value(3)  # llama-2-7b has 32 heads
    at.run()
    at.button(key="forecast").click().run()
    assert not at.exception
    assert len(at.error) == 1
    assert at.error[0].value.startswith("tp: 3 does not divide")
    assert not at.metric
    at.number_input(key="tp").set_value(2).run()  # fixed: the stale error goes away
    assert not at.error


def test_sweep_tab_runs_one_point_per_value():
    at = _page()
    at.selectbox(key="sweep_x_name").set_value("tp").run()
    at.text_input(key="sweep_x_tp").set_value("1, 2, 4").run()
    at.button(key="run_sweep").click().run()
    assert not at.exception and not at.error
    table = at.dataframe[0].value
    assert list(table["tp"]) == [1, 2, 4]
    for tp, ttft in zip(table["tp"], table["TTFT (ms)"], strict=True):
        p = payload_of("infer", {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb", "tp": int(tp)})
        assert ttft == pytest.approx(p["ttft_s"] * 1e3, rel=1e-12)


def test_sweep_over_the_point_cap_is_refused_by_name():
    at = _page()
    at.text_input(key="sweep_x_tp").set_value(",".join(str(i) for i in range(1, 18))).run()
    assert [e.value for e in at.error] == [
        "sweep: 17 points; at most 16 from the page (use `perfcast sweep` for larger grids)"]
    assert at.button(key="run_sweep").disabled


def test_scenario_tab_offers_the_yaml_of_the_current_inputs():
    at = _page()
    at.number_input(key="batch").set_value(4).run()
    (download,) = at.get("download_button")
    assert download.proto.label == "Download scenario YAML"
    yaml_block = next(c.value for c in at.code if c.value.startswith("id:"))
    command, options = flatten_scenario(yaml.safe_load(yaml_block))
    assert command == "infer"
    assert options["batch"] == 4 and options["gpu"] == "a100-sxm4-80gb"
    assert payload_of(command, options)["inputs"]["batch"] == 4
