import pytest

from perfcast.specs import cluster_for, get_device, get_model


@pytest.fixture(scope="session")
def llama7b():
    return get_model("llama-2-7b")


@pytest.fixture(scope="session")
def a100():
    return get_device("a100-sxm4-80gb")


@pytest.fixture(scope="session")
def a100_box(a100):
    return cluster_for(a100, 1)
