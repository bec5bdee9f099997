import os
from pathlib import Path

# LightGBM's OpenMP threads (the learned kernel model's fits) spin while waiting; on a shared
# two-core runner with pytest's other work that stalls a fit by orders of magnitude. Passive
# waiting changes no result. Set before anything loads OpenMP.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

from perfcast.specs import cluster_for, get_device, get_model  # noqa: E402

# CI replays the same examples every run (a red build means a change broke something);
# PERFCAST_HYPOTHESIS=explore draws fresh examples to hunt for new counterexamples. No
# per-example deadline: speed is measured in benchmarks/, not in tests, and a loaded two-core
# runner pushed a first example past hypothesis' 200 ms (test_residual's fit).
settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
settings.register_profile("explore", derandomize=False, print_blob=True, deadline=None)
settings.load_profile(os.environ.get("PERFCAST_HYPOTHESIS", "ci"))


# pytest runs on every core (pytest-xdist, `-n auto` in pyproject.toml). Each test file is one
# unit of work, so a module's fixtures (the accuracy checks' fits) are computed once; the slow
# folders are queued first, so no worker is left with a long tail. Files that time this CPU
# against a threshold (marker `cpu_timing`) are left out of that run: beside another worker
# their measurements are disturbed (S8's calibrated steps came out 2x worse once in 7 runs),
# so they run after it, alone: `pytest -m cpu_timing -n 0` (the README's test command).
SLOW_FIRST = ("validate", "suite")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    root = Path(__file__).parent

    def folder(item) -> str:
        return item.path.relative_to(root).parts[0]

    items.sort(key=lambda item: folder(item) not in SLOW_FIRST)  # stable: file order kept
    for item in items:
        item.add_marker(pytest.mark.xdist_group(str(item.path.relative_to(root))))


@pytest.fixture(scope="session")
def llama7b():
    return get_model("llama-2-7b")


@pytest.fixture(scope="session")
def a100():
    return get_device("a100-sxm4-80gb")


@pytest.fixture(scope="session")
def a100_box(a100):
    return cluster_for(a100, 1)


# Issue 16's "done when", checked on every CLI run the suite makes: no output cut to '…',
# no Python traceback and no RuntimeWarning reaches the user.
CUT_OR_CRASH = ("…", "Traceback (most recent call last)", "RuntimeWarning")


def _check_cli_output(result) -> None:
    text = result.output  # stdout and stderr, as the user saw them
    found = [mark for mark in CUT_OR_CRASH if mark in text]
    assert not found, f"CLI output contains {found}:\n{text[-2000:]}"


@pytest.fixture(autouse=True)
def _cli_output_contract(monkeypatch):
    """Every `CliRunner.invoke` in the suite is checked by `_check_cli_output`."""
    from typer.testing import CliRunner

    invoke = CliRunner.invoke

    def checked(self, *args, **kwargs):
        result = invoke(self, *args, **kwargs)
        _check_cli_output(result)
        return result

    monkeypatch.setattr(CliRunner, "invoke", checked)
