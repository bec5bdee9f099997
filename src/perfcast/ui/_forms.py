"""Widget values -> a command's options, its command line and its scenario YAML.

Pure functions, so the page's logic is tested without a browser: the UI only ever runs
`perfcast <command>` with the options built here, and the YAML it offers flattens back to
exactly those options.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from perfcast.errors import InputError

__all__ = ["MAX_SWEEP_POINTS", "SECTION_KEYS", "TASKS", "build_options", "cli_line",
           "flatten_scenario", "parse_values", "scenario", "scenario_yaml", "sweep_points"]

# Page label -> the perfcast command it runs.
TASKS: dict[str, str] = {
    "Inference forecast": "infer",
    "Serving simulation": "serve",
    "Training iteration": "train",
}

# Which scenario section an option belongs to; anything else goes under `options`.
SECTION_KEYS: dict[str, tuple[str, ...]] = {
    "hardware": ("gpu", "cluster", "num_gpus"),
    "plan": ("tp", "pp", "dp", "ep", "cp", "sp", "zero", "replicas", "schedule",
             "virtual_stages", "attention_dp", "recompute"),
    "workload": ("prompt_tokens", "output_tokens", "batch", "qps", "concurrency",
                 "num_requests", "lengths", "seed", "seq_len", "micro_batch", "global_batch"),
}

# Metrics each command's scenario asks for: (name, dotted path in the JSON payload).
_TARGETS: dict[str, tuple[tuple[str, str], ...]] = {
    "infer": (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("E2E", "e2e_s"),
              ("throughput", "throughput_tok_s")),
    "serve": (("TTFT p50", "ttft_s.p50"), ("TPOT p50", "tpot_s.p50"),
              ("throughput", "throughput_tok_s")),
    "train": (("iteration", "iteration_time_s"), ("tokens/s", "tokens_per_s"), ("MFU", "mfu")),
}

MAX_SWEEP_POINTS = 16
_OTHER_HARDWARE = {"gpu": "cluster", "cluster": "gpu"}


def build_options(command: str, model: str, hardware: Mapping[str, Any],
                  plan: Mapping[str, Any], workload: Mapping[str, Any],
                  extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The command's options from the page's sections; None and empty values are left out
    so the command's own defaults apply (as when a flag is omitted on the command line)."""
    if command not in _TARGETS:
        raise InputError("task", f"unknown command {command!r}", sorted(_TARGETS))
    if not model:
        raise InputError("model", "choose a model")
    if sum(bool(hardware.get(k)) for k in ("gpu", "cluster")) != 1:
        raise InputError("hardware", "choose exactly one of a GPU or a cluster",
                         ["gpu", "cluster"])
    options: dict[str, Any] = {"model": model}
    for section in (hardware, plan, workload, extra or {}):
        for key, value in section.items():
            if value is None or value == "":
                continue
            if key in options:
                raise InputError(key, "set twice")
            options[key] = value
    if command == "serve":  # serve's lengths are specs (N, LO,HI or A,MAX): text
        for key in ("prompt_tokens", "output_tokens"):
            if key in options:
                options[key] = str(options[key])
    return options


def _flag(key: str, value: Any) -> list[str]:
    flag = "--" + key.replace("_", "-")
    if isinstance(value, bool):
        return [flag if value else "--no-" + key.replace("_", "-")]
    if isinstance(value, list | tuple):
        return [part for item in value for part in (flag, str(item))]
    return [flag, str(value)]


def cli_line(command: str, options: Mapping[str, Any]) -> str:
    """The shell command that prints the same numbers: `perfcast <command> ... --json`."""
    words = ["perfcast", command]
    for key, value in options.items():
        words += _flag(key, value)
    return shlex.join([*words, "--json"])


def _slug(text: str) -> str:
    keep = "".join(c if c.isalnum() or c in "._-" else "-" for c in text)
    return keep.strip("-._")[:64] or "scenario"


def scenario(command: str, options: Mapping[str, Any], title: str | None = None) -> dict:
    """The options as a scenario (id, title, command, model, hardware, plan, workload,
    options, targets): the format `perfcast run FILE.yaml` and the suite read."""
    rest = dict(options)
    model = rest.pop("model", None)
    if not model:
        raise InputError("model", "a scenario needs a model")
    sections: dict[str, dict[str, Any]] = {name: {} for name in (*SECTION_KEYS, "options")}
    for key, value in rest.items():
        name = next((s for s, keys in SECTION_KEYS.items() if key in keys), "options")
        sections[name][key] = list(value) if isinstance(value, tuple) else value
    hardware = options.get("gpu") or options.get("cluster") or "hardware"
    return {
        "id": _slug(f"ui-{command}-{model}-{hardware}"),
        "title": title or f"{command} {model} on {hardware}",
        "category": "user",
        "command": command,
        "model": model,
        **{name: body for name, body in sections.items() if body},
        "targets": [{"name": n, "path": p} for n, p in _TARGETS.get(command, ())],
    }


def scenario_yaml(command: str, options: Mapping[str, Any], title: str | None = None) -> str:
    """`scenario(...)` as YAML text (safe_dump: plain types only, key order kept)."""
    return yaml.safe_dump(scenario(command, options, title), sort_keys=False)


def flatten_scenario(data: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """A scenario mapping back to (command, options): the inverse of `scenario`."""
    if not isinstance(data, Mapping) or "command" not in data:
        raise InputError("command", "a scenario names its command")
    model = data.get("model")
    options: dict[str, Any] = dict(model) if isinstance(model, Mapping) else {"model": model}
    for name in (*SECTION_KEYS, "options"):
        section = data.get(name) or {}
        if not isinstance(section, Mapping):
            raise InputError(name, "must be a mapping of option: value")
        for key, value in section.items():
            if key in options:
                raise InputError(f"{name}.{key}", "set in two sections of the scenario")
            options[key] = value
    return data["command"], options


def parse_values(field: str, text: str, kind: type) -> list[Any]:
    """A sweep axis typed as comma-separated text ("1, 2, 4") -> its values."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if not parts:
        raise InputError(field, "give at least one value, comma-separated", "e.g. 1,2,4")
    try:
        values = [kind(p) for p in parts]
    except ValueError:
        raise InputError(field, f"{text!r} is not a comma-separated list of "
                         f"{kind.__name__} values") from None
    if len(set(values)) != len(values):
        raise InputError(field, f"{text!r} repeats a value")
    return values


def sweep_points(base: Mapping[str, Any],
                 axes: Sequence[tuple[str, Sequence[Any]]]) -> list[dict[str, Any]]:
    """Every combination of one or two axes' values over the base options (first axis
    slowest); at most MAX_SWEEP_POINTS, so a sweep from the page stays interactive."""
    if not 1 <= len(axes) <= 2:
        raise InputError("sweep", "sweep one or two options")
    if len(axes) == 2 and axes[0][0] == axes[1][0]:
        raise InputError("sweep", f"both axes are {axes[0][0]!r}; pick two different options")
    total = 1
    for _, values in axes:
        total *= len(values)
    if total > MAX_SWEEP_POINTS:
        raise InputError("sweep", f"{total} points; at most {MAX_SWEEP_POINTS} from the page "
                         "(use `perfcast sweep` for larger grids)")
    base = dict(base)
    for key, _ in axes:  # a swept GPU replaces the chosen cluster, and the other way round
        base.pop(_OTHER_HARDWARE.get(key, ""), None)
    points = [base]
    for key, values in axes:
        points = [{**p, key: v} for p in points for v in values]
    return points
