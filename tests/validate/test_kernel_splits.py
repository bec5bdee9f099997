"""kernel_splits restricted to some held-out devices is the unrestricted list's splits of those
devices, in order, with the same training and test rows (the CI cuts score two GPUs each)."""

import pytest

from perfcast.measure import load_store
from perfcast.validate import kernel_splits


@pytest.fixture(scope="module")
def store():
    rows = load_store()
    return rows.groupby(["source", "device"], sort=False).head(40)  # every split, small


@pytest.mark.parametrize("names", [None, ["generation"], ["neusight"], ["loo:aiconfigurator"],
                                   ["loo:vidur", "generation"]], ids=str)
@pytest.mark.parametrize("devices", [["h100-sxm", "b200-sxm"], ["gb200"], [], ["no-such-gpu"]],
                         ids=str)
def test_restricted_splits_are_the_full_lists_splits_of_those_devices(store, names, devices):
    full = [s for s in kernel_splits(store, names) if s.device in devices]
    some = kernel_splits(store, names, devices)
    assert [(s.name, s.device) for s in some] == [(s.name, s.device) for s in full]
    for a, b in zip(some, full, strict=True):
        assert a.train.equals(b.train) and a.test.equals(b.test)


def test_no_restriction_is_every_split(store):
    assert [(s.name, s.device) for s in kernel_splits(store, None, None)] == \
        [(s.name, s.device) for s in kernel_splits(store)]
    assert len(kernel_splits(store)) > len(kernel_splits(store, None, ["h100-sxm"])) > 0
