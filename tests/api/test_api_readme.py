"""The README's Python API examples run as written."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _examples() -> list[str]:
    text = README.read_text()
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_section_has_three_examples():
    assert len(_examples()) == 3


@pytest.mark.parametrize("index", range(3))
def test_example_runs(index, capsys):
    exec(compile(_examples()[index], f"README example {index + 1}", "exec"), {})
