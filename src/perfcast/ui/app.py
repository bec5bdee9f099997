"""The perfcast page (run by `perfcast ui`, i.e. `streamlit run` on this file).

Sidebar: task, model, hardware, plan, workload. Tabs: the forecast (metrics, breakdown,
memory, serving CDFs), a small sweep, and the scenario as YAML and as a command line.
Every number comes from `perfcast.api.run`, the path behind the CLI's `--json`; bad input is
shown as one line naming the field (`st.error`), never a traceback.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from perfcast.api import default_stack
from perfcast.errors import InputError
from perfcast.specs import cluster_names, device_names, model_names, stack_names
from perfcast.ui._forms import (
    MAX_SWEEP_POINTS,
    TASKS,
    build_options,
    cli_line,
    parse_values,
    scenario,
    scenario_yaml,
    sweep_points,
)
from perfcast.ui._runner import forecast, run_grid
from perfcast.ui._views import (
    breakdown_frame,
    cdf_frame,
    headline,
    latency_frame,
    memory_frame,
    sweep_frame,
)

DTYPES = ("bf16", "fp16", "fp8", "fp32")
WEIGHT_DTYPES = ("same as dtype", "fp8", "int8", "int4")
STACK_DEFAULT = "the stack's engine"
SCHEDULERS = (STACK_DEFAULT, "vllm-v0", "vllm-v1", "sarathi", "prefill-first", "orca",
              "static")
RECOMPUTE = ("none", "selective", "full")
_HEIGHT = 380  # px: a breakdown's chart and table side by side
# Sweepable options per command: option -> (type, default values).
SWEEP_AXES: dict[str, dict[str, tuple[type, str]]] = {
    "infer": {"tp": (int, "1,2,4,8"), "gpu": (str, "a100-sxm4-80gb,h100-sxm,h200-sxm"),
              "batch": (int, "1,4,16,64"), "prompt_tokens": (int, "128,512,2048"),
              "output_tokens": (int, "32,128,512")},
    "serve": {"qps": (float, "1,2,4,8"), "tp": (int, "1,2,4"), "replicas": (int, "1,2,4"),
              "gpu": (str, "a100-sxm4-80gb,h100-sxm"), "scheduler": (str, "vllm-v0,sarathi")},
    "train": {"tp": (int, "1,2,4,8"), "pp": (int, "1,2,4"), "num_gpus": (int, "8,16,32"),
              "gpu": (str, "a100-sxm4-80gb,h100-sxm"), "micro_batch": (int, "1,2,4")},
}


def _index(options: list[str] | tuple[str, ...], default: str) -> int:
    return options.index(default) if default in options else 0


def _hardware() -> dict[str, Any]:
    st.subheader("Hardware")
    kind = st.radio("Hardware", ("GPU", "Cluster"), horizontal=True, key="hw_kind",
                    label_visibility="collapsed")
    if kind == "GPU":
        gpus = device_names()
        return {"gpu": st.selectbox("GPU", gpus, _index(gpus, "a100-sxm4-80gb"), key="gpu")}
    clusters = cluster_names()
    return {"cluster": st.selectbox("Cluster", clusters, _index(clusters, "dgx-a100"),
                                    key="cluster")}


def _int(label: str, key: str, value: int, lo: int = 1, hi: int = 1_000_000) -> int:
    return int(st.number_input(label, lo, hi, value, step=1, key=key))


def _infer_inputs() -> tuple[dict, dict, dict]:
    st.subheader("Plan")
    plan = {"tp": _int("Tensor parallel (TP)", "tp", 1, hi=64)}
    st.subheader("Workload")
    workload = {"prompt_tokens": _int("Prompt tokens", "prompt_tokens", 512),
                "output_tokens": _int("Output tokens", "output_tokens", 128),
                "batch": _int("Batch (identical requests)", "batch", 1, hi=4096)}
    return plan, workload, _precision()


def _serve_inputs() -> tuple[dict, dict, dict]:
    st.subheader("Plan")
    plan = {"tp": _int("Tensor parallel (TP)", "tp", 1, hi=64),
            "pp": _int("Pipeline stages (PP)", "pp", 1, hi=64),
            "replicas": _int("Replicas", "replicas", 1, hi=256)}
    st.subheader("Workload")
    workload = {"qps": float(st.number_input("Arrival rate (QPS)", 0.01, 10_000.0, 2.0,
                                             step=0.5, key="qps")),
                "num_requests": _int("Requests to simulate", "num_requests", 100, hi=20_000),
                "prompt_tokens": _int("Prompt tokens", "prompt_tokens", 512),
                "output_tokens": _int("Output tokens", "output_tokens", 128)}
    scheduler = st.selectbox("Scheduler", SCHEDULERS, key="scheduler")
    extra = {"scheduler": None if scheduler == STACK_DEFAULT else scheduler,
             **_precision()}
    return plan, workload, extra


def _train_inputs() -> tuple[dict, dict, dict]:
    st.subheader("Plan")
    plan = {"num_gpus": _int("GPUs", "num_gpus", 8, hi=100_000),
            "tp": _int("Tensor parallel (TP)", "tp", 1, hi=64),
            "pp": _int("Pipeline stages (PP)", "pp", 1, hi=256),
            "zero": st.selectbox("ZeRO stage", (0, 1, 2, 3), 1, key="zero"),
            "recompute": st.selectbox("Recomputation", RECOMPUTE, key="recompute")}
    st.caption("Data parallelism fills the remaining GPUs (GPUs / (TP x PP)).")
    st.subheader("Workload")
    global_batch = _int("Global batch (0: one micro-batch per DP rank)", "global_batch", 0,
                        lo=0)
    workload = {"seq_len": _int("Sequence length", "seq_len", 2048),
                "micro_batch": _int("Micro-batch", "micro_batch", 1, hi=4096),
                "global_batch": global_batch or None}
    return plan, workload, {"dtype": st.selectbox("dtype", DTYPES, key="dtype")}


def _precision() -> dict[str, Any]:
    weights = st.selectbox("Weight dtype", WEIGHT_DTYPES, key="weight_dtype")
    return {"dtype": st.selectbox("dtype (activations)", DTYPES, key="dtype"),
            "weight_dtype": None if weights == WEIGHT_DTYPES[0] else weights}


_INPUTS = {"infer": _infer_inputs, "serve": _serve_inputs, "train": _train_inputs}


def _stack(command: str) -> dict[str, Any]:
    """The software stack (`perfcast stacks`); the first choice is the question's default."""
    st.subheader("Software stack")
    default = f"default ({default_stack(command)})"
    name = st.selectbox("Stack", [default, *stack_names()], key="stack")
    return {} if name == default else {"stack": name}


def sidebar() -> tuple[str, dict[str, Any] | None]:
    """The task's command and its options (None, with the error shown, when invalid)."""
    with st.sidebar:
        st.header("Scenario")
        command = TASKS[st.radio("Task", list(TASKS), key="task")]
        models = model_names()
        model = st.selectbox("Model", models, _index(models, "llama-2-7b"), key="model")
        hardware = _hardware()
        plan, workload, extra = _INPUTS[command]()
        extra = {**extra, **_stack(command)}
    try:
        return command, build_options(command, model, hardware, plan, workload, extra)
    except InputError as exc:
        st.error(str(exc))
        return command, None


def _metrics(command: str, payload: dict) -> None:
    items = headline(command, payload)
    for start in range(0, len(items), 4):
        for column, (label, value) in zip(st.columns(4), items[start:start + 4], strict=False):
            column.metric(label, value)
    band = payload.get("interval_s", {})
    if band:
        st.caption("90% interval: " + ", ".join(
            f"{k.removesuffix('_s').upper()} {v['low'] * 1e3:.1f}-{v['high'] * 1e3:.1f} ms"
            for k, v in band.items()))


_BREAKDOWN_COLUMNS = {
    "ms": st.column_config.NumberColumn("ms", format="%.3f"),
    "share": st.column_config.ProgressColumn("share", min_value=0.0, max_value=1.0,
                                             format="percent"),
}


def _breakdown(command: str, payload: dict) -> None:
    frame = breakdown_frame(command, payload)
    if frame.empty:
        return
    st.subheader("Where the time goes")
    left, right = st.columns([1, 1])
    if command == "infer":
        left.bar_chart(frame, x="family", y="ms", color="phase", horizontal=True,
                       sort="-ms", x_label="", y_label="ms", height=_HEIGHT)
    else:
        left.bar_chart(frame, x="part", y="ms", horizontal=True, sort="-ms", x_label="",
                       y_label="ms", height=240)
    right.dataframe(frame, hide_index=True, height=_HEIGHT if len(frame) > 8 else "auto",
                    column_config=_BREAKDOWN_COLUMNS)


def _memory(command: str, payload: dict) -> None:
    frame = memory_frame(command, payload)
    if frame.empty:
        return
    st.subheader("Memory per GPU")
    left, right = st.columns([1, 1])
    left.bar_chart(frame, x="kind", y="GB", horizontal=True, sort="-GB", x_label="",
                   y_label="GB", height=240)
    right.dataframe(frame, hide_index=True,
                    column_config={"GB": st.column_config.NumberColumn("GB", format="%.2f")})


def _serving(result) -> None:
    st.subheader("Latency (ms)")
    st.dataframe(latency_frame(result.payload).style.format("{:.1f}"))
    if result.requests is None or result.requests.empty:
        return
    st.subheader("Per-request CDFs")
    for column, (name, key) in zip(st.columns(2), (("TTFT", "ttft_s"), ("TPOT", "tpot_s")),
                                   strict=True):
        column.caption(f"{name}: fraction of requests at or below (ms)")
        column.line_chart(cdf_frame(result.requests, key), x="ms", y="fraction")
    with st.expander(f"Per-request table ({len(result.requests)} requests)"):
        st.dataframe(result.requests, hide_index=True)


def forecast_tab(command: str, options: dict[str, Any] | None) -> None:
    """The Forecast button, then the last result's metrics, breakdown, memory and CDFs."""
    if options is not None:
        st.code(cli_line(command, options), language="bash", wrap_lines=True)
    if st.button("Forecast", type="primary", key="forecast", disabled=options is None):
        st.session_state.pop("forecast_error", None)
        try:
            with st.spinner("Forecasting..."):
                st.session_state["result"] = forecast(command, options)
        except InputError as exc:
            st.session_state["result"] = None
            st.session_state["forecast_error"] = (command, options, str(exc))
    failed = st.session_state.get("forecast_error")
    if failed and failed[:2] == (command, options):  # shown until the inputs change
        st.error(failed[2])
    result = st.session_state.get("result")
    if result is None:
        return
    if (result.command, result.options) != (command, options):
        st.info("The inputs changed since this forecast: press Forecast to update it.")
    _metrics(result.command, result.payload)
    _breakdown(result.command, result.payload)
    _memory(result.command, result.payload)
    if result.command == "serve":
        _serving(result)
    with st.expander("JSON payload"):
        st.json(result.payload, expanded=False)


def _axis(command: str, label: str, key: str, skip: str | None = None) -> tuple[str, list]:
    names = [n for n in SWEEP_AXES[command] if n != skip]
    name = st.selectbox(label, names, key=f"{key}_name")
    kind, default = SWEEP_AXES[command][name]
    text = st.text_input(f"{name} values (comma-separated)", default, key=f"{key}_{name}")
    return name, parse_values(name, text, kind)


def sweep_tab(command: str, options: dict[str, Any] | None) -> None:
    """A grid of one or two options over the current inputs: table and chart."""
    st.caption(f"Runs the current inputs once per point (at most {MAX_SWEEP_POINTS}); "
               "larger grids: `perfcast sweep`.")
    try:
        left, right = st.columns(2)
        with left:
            axes = [_axis(command, "Sweep", "sweep_x")]
        with right:
            if st.checkbox("Second option", key="sweep_two"):
                axes.append(_axis(command, "and", "sweep_y", skip=axes[0][0]))
        points = sweep_points(options, axes) if options is not None else None
    except InputError as exc:
        st.error(str(exc))
        points = None
    if st.button("Run sweep", key="run_sweep", disabled=points is None):
        bar = st.progress(0.0, text=f"Running {len(points)} points...")
        names = [name for name, _ in axes]
        results = run_grid(command, points, progress=lambda done, total: bar.progress(
            done / total, text=f"{done} of {total} points"))
        bar.empty()
        st.session_state["sweep"] = (command, names, sweep_frame(command, names, results))
    _sweep_result(command)


def _sweep_result(command: str) -> None:
    stored = st.session_state.get("sweep")
    if stored is None or stored[0] != command:
        return
    _, names, frame = stored
    metrics = [c for c in frame.columns if c not in (*names, "error")]
    shown = frame if frame["error"].any() else frame.drop(columns="error")
    st.dataframe(shown, hide_index=True, height=38 + 35 * len(frame), column_config={
        c: st.column_config.NumberColumn(c, format="%.3f" if "ms" in c else "%.2f")
        for c in metrics})
    metric = st.selectbox("Chart", metrics, key="sweep_metric")
    color = names[1] if len(names) > 1 else None
    chart = frame.dropna(subset=[metric]).astype({n: str for n in names[1:]})
    if chart.empty:
        st.warning("No point of the sweep ran; the table's error column says why.")
    elif chart[names[0]].dtype.kind in "if":
        st.line_chart(chart, x=names[0], y=metric, color=color)
    else:
        st.bar_chart(chart, x=names[0], y=metric, color=color, stack=False)


def scenario_tab(command: str, options: dict[str, Any] | None) -> None:
    """The current inputs as a scenario file (for `perfcast run`) and a command line."""
    if options is None:
        st.info("Fix the inputs in the sidebar to get a scenario.")
        return
    text = scenario_yaml(command, options)
    st.download_button("Download scenario YAML", text, key="download_yaml", type="primary",
                       file_name=f"{scenario(command, options)['id']}.yaml",
                       mime="application/x-yaml")
    st.code(text, language="yaml")
    st.caption("The same forecast from a shell:")
    st.code(cli_line(command, options), language="bash", wrap_lines=True)


def main() -> None:
    st.set_page_config(page_title="perfcast", layout="wide")
    st.title("perfcast")
    st.caption("Forecast ML workload performance on hardware you do not own: "
               "the numbers are those `perfcast <command> --json` prints.")
    command, options = sidebar()
    forecast_, sweep, scenario_ = st.tabs(["Forecast", "Sweep", "Scenario YAML"])
    with forecast_:
        forecast_tab(command, options)
    with sweep:
        sweep_tab(command, options)
    with scenario_:
        scenario_tab(command, options)


main()
