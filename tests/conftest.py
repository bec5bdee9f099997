import os

import pytest
from hypothesis import settings

from perfcast.specs import cluster_for, get_device, get_model

# CI replays the same examples every run (a red build means a change broke something);
# PERFCAST_HYPOTHESIS=explore draws fresh examples to hunt for new counterexamples.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("PERFCAST_HYPOTHESIS", "ci"))


@pytest.fixture(scope="session")
def llama7b():
    return get_model("llama-2-7b")


@pytest.fixture(scope="session")
def a100():
    return get_device("a100-sxm4-80gb")


@pytest.fixture(scope="session")
def a100_box(a100):
    return cluster_for(a100, 1)
