"""Run scenarios and grade each by the SCENARIOS.md rule: supported when every target metric
is printed, partial when some are, else unsupported.

Each run of a scenario is a request (`perfcast.api.request_from_options`) answered by
`perfcast.api.run`, the path every face takes, so a number the suite reports is the number
`perfcast <command> ... --json` prints."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from importlib import resources
from multiprocessing import get_context
from typing import Any

from perfcast.api import run_options
from perfcast.errors import InputError, close_matches
from perfcast.suite._schema import Scenario, Target, parse_scenario

__all__ = ["STATUSES", "Execute", "ScenarioResult", "TargetValue", "builtin_scenarios",
           "grade", "run_scenario", "run_suite"]

STATUSES = ("supported", "partial", "unsupported")
# (command, options) -> the command's JSON payload; tests pass doubles.
Execute = Callable[[str, Mapping[str, Any]], dict]


def answer(command: str, options: Mapping[str, Any]) -> dict:
    """The payload of the request `command` builds from a scenario run's options."""
    return run_options(command, options).payload()


@dataclass(frozen=True)
class TargetValue:
    """One target metric of one run: its value, or None when the run did not print it."""

    name: str
    run: str
    path: str
    value: Any
    unit: str | None = None  # declared by the target; None: read from the key's suffix


@dataclass(frozen=True)
class ScenarioResult:
    """A scenario's grade, target values and (outside the deterministic part) its wall time."""

    id: str
    title: str
    category: str
    status: str
    values: tuple[TargetValue, ...]
    errors: dict[str, str] = field(default_factory=dict)
    wall_s: float = field(default=0.0, compare=False)


_MISSING = object()  # a path that names no key (a misspelling), unlike a null value


def _lookup(node: Any, path: str) -> Any:
    """The value at a dotted path; keys may contain dots themselves ('family.gemm'), so the
    longest key that matches wins. A null on the way is the value (None); a path that
    matches no key is `_MISSING`."""
    if path == "" or node is None:
        return node
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        key, rest = ".".join(parts[:cut]), ".".join(parts[cut:])
        if isinstance(node, Mapping) and key in node:
            return _lookup(node[key], rest)
        if isinstance(node, list) and key.isdigit() and int(key) < len(node):
            return _lookup(node[int(key)], rest)
    return _MISSING


def _paths(node: Any, prefix: str = "") -> Iterator[str]:
    """Every dotted path of a payload (mappings' keys, lists' indices)."""
    items = (node.items() if isinstance(node, Mapping)
             else enumerate(node) if isinstance(node, list) else ())
    for key, value in items:
        path = f"{prefix}{key}"
        yield path
        yield from _paths(value, path + ".")


def _value(scenario: Scenario, target: Target, run: str, payload: Mapping[str, Any] | None
           ) -> Any:
    """The target's value in one run's payload (None: the run failed, or printed null); a
    path that names nothing in a payload the run did print is a scenario error."""
    value = _lookup(payload, target.path)
    if value is not _MISSING:
        return value
    hint = close_matches(target.path, list(_paths(payload)), n=3)
    raise InputError(f"targets.{target.name}", f"path {target.path!r} names no key of the "
                     f"`{scenario.command}` payload of run {run!r}"
                     + (f"; did you mean {', '.join(hint)}?" if hint else ""),
                     "a dotted key of the command's --json output")


def _ratio(base: Any, value: Any) -> float | None:
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (base, value))
    return base / value if numeric and value else None


def grade(scenario: Scenario, payloads: Mapping[str, Mapping[str, Any] | None]
          ) -> tuple[str, tuple[TargetValue, ...]]:
    """The status and the target values found in each run's payload (None: run failed);
    a target path that matches nothing in a printed payload raises an InputError."""
    values = []
    for target in scenario.targets:
        for run in [target.variant] if target.variant else list(payloads):
            value = _value(scenario, target, run, payloads[run])
            if target.baseline is not None:
                base = payloads[target.baseline]
                value = _ratio(_value(scenario, target, target.baseline, base), value)
            values.append(TargetValue(target.name, run, target.path, value, target.shown_unit))
    found = sum(v.value is not None for v in values)
    status = "supported" if found == len(values) else "partial" if found else "unsupported"
    return status, tuple(values)


def run_scenario(scenario: Scenario, execute: Execute = answer) -> ScenarioResult:
    """Run every variant of one scenario; a failing run is recorded, not raised."""
    start = time.perf_counter()
    payloads: dict[str, dict | None] = {}
    errors: dict[str, str] = {}
    for run, options in scenario.runs().items():
        try:
            payloads[run] = execute(scenario.command, options)
        except InputError as exc:
            payloads[run] = None
            errors[run] = str(exc)
    status, values = grade(scenario, payloads)
    return ScenarioResult(scenario.id, scenario.title, scenario.category, status, values,
                          errors, time.perf_counter() - start)


def _run_one(args: tuple[Scenario, Execute]) -> ScenarioResult:
    return run_scenario(*args)


def _cost_rank(scenario: Scenario) -> tuple[int, int]:
    """Pool order: the commands that take seconds per run (an accelerator's mapping
    search, a capacity search, event-driven serving) first, and more runs before fewer, so
    that no long scenario starts last while the other workers sit idle."""
    return _SLOW_COMMANDS.get(scenario.command, len(_SLOW_COMMANDS)), -len(scenario.runs())


_SLOW_COMMANDS = {"accel": 0, "capacity": 1, "serve": 2, "infer": 3}


def run_suite(scenarios: Iterable[Scenario], execute: Execute = answer, workers: int = 1,
              on_done: Callable[[ScenarioResult], None] | None = None
              ) -> list[ScenarioResult]:
    """Results in the scenarios' order. `exclusive` scenarios (they time this machine) run
    first, one at a time in this process, with nothing of ours beside them: on a small
    machine a pool worker on the other core (maybe the same physical core) doubles the
    times they measure. With `workers` > 1 the rest then share a process pool, the slowest
    commands first."""
    scenarios = list(scenarios)
    done: dict[int, ScenarioResult] = {}

    def finish(i: int, result: ScenarioResult) -> None:
        done[i] = result
        if on_done:
            on_done(result)

    alone = [i for i, s in enumerate(scenarios) if s.exclusive or workers <= 1]
    for i in alone:
        finish(i, run_scenario(scenarios[i], execute))
    rest = sorted((i for i in range(len(scenarios)) if i not in done),
                  key=lambda i: _cost_rank(scenarios[i]))
    if rest:
        # spawn, not fork: the caller may be running a progress thread (rich) while we fork
        with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(_run_one, (scenarios[i], execute)): i for i in rest}
            for future in as_completed(futures):
                finish(futures[future], future.result())
    return [done[i] for i in range(len(scenarios))]


def builtin_scenarios() -> list[Scenario]:
    """The 43 scenarios of SCENARIOS.md shipped with the package, in document order."""
    folder = resources.files("perfcast.suite") / "data" / "scenarios"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".yaml")),
                   key=lambda f: f.name)
    return [parse_scenario(f.read_text(encoding="utf-8"), origin=f.name) for f in files]
