"""README figures come from scripts/readme_figures.py: every marker names a figure it makes.

Fast: nothing is regenerated here (the script runs the suite and `validate models`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("readme_figures",
                                                  ROOT / "scripts" / "readme_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_readme_marker_names_a_known_figure():
    script = _script()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert script.markers(text), "README has no figure markers"
    assert script.unknown_markers(text) == []


def test_every_known_figure_has_a_marker():
    script = _script()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert not script.KNOWN - set(script.markers(text))


def test_check_mode_parses_and_passes():
    assert _script().main(["--check"]) == 0


def test_rewrite_replaces_only_named_markers():
    script = _script()
    text = ("a <!-- fig:suite_time -->36 s<!-- /fig --> "
            "b <!-- fig:suite_supported -->1/2<!-- /fig -->")
    assert script.rewrite(text, {"suite_time": "40 s"}) == text.replace("36 s", "40 s")
