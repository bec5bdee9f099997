"""Regenerate the README's figures that come from commands, between markers.

A figure in README.md is written as `<!-- fig:NAME -->VALUE<!-- /fig -->`; this script runs the
command behind each NAME and rewrites VALUE, so the README says what the commands print.
Run: `python scripts/readme_figures.py [--only suite,models]` (minutes: it runs the suite and
`perfcast validate models --json`); `--check` only checks that every marker names a known
figure (fast, used by tests/test_readme_figures.py).

Figures covered: the suite's wall time and coverage (as `python benchmarks/bench_suite.py`
measures them, 2 workers) and the per-device MAPE table of `perfcast validate models`.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
MARKER = re.compile(r"<!-- fig:(?P<name>[a-z0-9_]+) -->(?P<value>.*?)<!-- /fig -->")

# device slug in `validate models` -> its README row (group "all")
MODEL_DEVICES = ("p100-pcie-16gb", "v100-pcie-32gb", "a100-sxm4-40gb", "mi100",
                 "a100-pcie-40gb", "a100-pcie-80gb", "mi210", "t4")
MODEL_COLUMNS = ("roofline", "sum_of_kernels", "sum_of_measured_ops", "perfcast")
PERFCAST_TIERS = ("target_measured", "cross_generation")


def _slug(device: str) -> str:
    return device.replace("-", "_")


def model_figure_names() -> list[str]:
    """`models_<device>_<column>` for every cell of the README's models table."""
    return [f"models_{_slug(d)}_{c}" for d in MODEL_DEVICES for c in MODEL_COLUMNS]


SOURCES = {"suite": ["suite_time", "suite_supported"], "models": model_figure_names()}
KNOWN = {name for names in SOURCES.values() for name in names}


def suite_figures() -> dict[str, str]:
    """Wall time and coverage of all builtin scenarios on 2 workers (bench_suite's run)."""
    from perfcast.suite import builtin_scenarios, run_suite

    scenarios = builtin_scenarios()
    start = time.perf_counter()
    results = run_suite(scenarios, workers=2)
    wall_s = time.perf_counter() - start
    supported = sum(r.status == "supported" for r in results)
    return {"suite_time": f"{wall_s:.0f} s", "suite_supported": f"{supported}/{len(results)}"}


def _cli_json(*args: str) -> dict:
    """What `perfcast ARGS --json` prints, parsed."""
    done = subprocess.run(["perfcast", *args, "--json"], check=True, capture_output=True,
                          text=True)
    return json.loads(done.stdout)


def models_figures() -> dict[str, str]:
    """Per-device whole-model MAPE (group `all`) from `perfcast validate models --json`."""
    rows = [r for r in _cli_json("validate", "models")["rows"]
            if r["split"] == "models" and r["group"] == "all"]
    mape = {(r["device"], r["method"]): r["mape"] for r in rows}
    figures = {}
    for device in MODEL_DEVICES:
        for column in MODEL_COLUMNS:
            methods = PERFCAST_TIERS if column == "perfcast" else (column,)
            value = next((mape[(device, m)] for m in methods if (device, m) in mape), None)
            figures[f"models_{_slug(device)}_{column}"] = ("-" if value is None
                                                           else f"{value:.1%}")
    return figures


PRODUCERS = {"suite": suite_figures, "models": models_figures}


def markers(text: str) -> list[str]:
    """The figure names of every marker in `text`, in order."""
    return [m.group("name") for m in MARKER.finditer(text)]


def unknown_markers(text: str) -> list[str]:
    """Markers that name no figure this script makes."""
    return [name for name in markers(text) if name not in KNOWN]


def rewrite(text: str, values: dict[str, str]) -> str:
    """`text` with each marker whose name is in `values` holding its new value."""
    def sub(match: re.Match) -> str:
        name = match.group("name")
        value = values.get(name, match.group("value"))
        return f"<!-- fig:{name} -->{value}<!-- /fig -->"
    return MARKER.sub(sub, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="only check that every marker names a known figure")
    parser.add_argument("--only", default=",".join(PRODUCERS),
                        help=f"sources to regenerate, comma-separated: {', '.join(PRODUCERS)}")
    args = parser.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    bad = unknown_markers(text)
    if bad or args.check:
        print(f"unknown figure markers: {', '.join(bad)}" if bad else
              f"{len(markers(text))} markers, all known")
        return 1 if bad else 0
    values: dict[str, str] = {}
    for source in args.only.split(","):
        values.update(PRODUCERS[source]())
    README.write_text(rewrite(text, values), encoding="utf-8")
    for name, value in values.items():
        print(f"{name}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
