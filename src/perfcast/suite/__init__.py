"""The scenario suite: the questions of SCENARIOS.md as validated YAML files, run through the
same commands a user types, each graded supported / partial / unsupported."""

from perfcast.suite._report import format_value, suite_markdown, suite_summary
from perfcast.suite._run import (
    STATUSES,
    Execute,
    ScenarioResult,
    TargetValue,
    builtin_scenarios,
    grade,
    run_scenario,
    run_suite,
)
from perfcast.suite._schema import (
    MAX_SCENARIO_BYTES,
    SECTIONS,
    Scenario,
    Target,
    load_scenario,
    parse_scenario,
)

__all__ = ["MAX_SCENARIO_BYTES", "SECTIONS", "STATUSES", "Execute", "Scenario",
           "ScenarioResult", "Target", "TargetValue", "builtin_scenarios", "format_value",
           "grade", "load_scenario", "parse_scenario", "run_scenario", "run_suite",
           "suite_markdown", "suite_summary"]
