import pytest

from perfcast.specs import get_cluster, get_model


@pytest.fixture(scope="session")
def gpt2m():
    return get_model("gpt2-medium")


@pytest.fixture(scope="session")
def llama13b():
    return get_model("llama-2-13b")


@pytest.fixture(scope="session")
def a100x8():
    return get_cluster("dgx-a100", 8)


@pytest.fixture(scope="session")
def h100x8():
    return get_cluster("dgx-h100", 8)
