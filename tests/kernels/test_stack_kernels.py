"""A stack's kernel families: routed to its kernel source, and honest about where each
family's times come from."""

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.kernels import (
    KERNEL_FAMILIES,
    StackTimeModel,
    default_time_model,
    family_provenance,
    stack_families,
    stack_kernel_model,
)
from perfcast.ops import COLUMNS
from perfcast.specs import get_device, get_stack, stack_names

STATUSES = {"measured", "cross-generation", "borrowed", "roofline-only"}


class Constant:
    """A test double: every kernel takes `seconds`."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def kernel_times(self, ops, device):
        return np.full(len(ops), self.seconds)


def _ops(families):
    rows = [{"layer": "l", "op": "x", "family": f, "phase": "p", "b": 1, "m": 64, "n": 64,
             "k": 64, "flops": 1e6, "bytes_read": 1e4, "bytes_written": 1e4, "dtype": "bf16",
             "count": 1} for f in families]
    return pd.DataFrame(rows)[COLUMNS]


def test_rows_go_to_their_family_route():
    model = StackTimeModel({"gemm": Constant(2.0)}, Constant(1.0))
    times = model.kernel_times(_ops(["gemm", "norm", "gemm", "attn_prefill"]),
                               get_device("h100-sxm"))
    assert times.tolist() == [2.0, 1.0, 2.0, 1.0]


def test_a_stack_of_default_sources_is_the_default_model():
    base = default_time_model()
    assert stack_kernel_model(get_stack("trtllm"), base) is base


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(stack_names()), st.sampled_from(["h100-sxm", "a100-sxm4-80gb", "l4"]))
def test_every_family_has_a_status_and_borrowed_ones_say_whose(name, gpu):
    info = family_provenance(get_stack(name), get_device(gpu))
    assert set(info) == set(KERNEL_FAMILIES)
    for family, entry in info.items():
        assert entry["status"] in STATUSES
        if entry["status"] == "borrowed":
            assert entry["note"], family
        if entry["status"] == "measured":
            assert gpu in entry["devices"]


def test_a_stack_without_its_own_vector_kernels_says_so():
    fams = stack_families(get_stack("hf-transformers"))
    assert fams["norm"]["status"] == "borrowed" and "NeuSight" in fams["norm"]["note"]
    assert fams["attn_prefill"]["status"] == "borrowed"  # SDPA priced with vLLM's tables


def test_measured_only_on_the_devices_with_data():
    here = family_provenance(get_stack("trtllm"), get_device("h100-sxm"))
    elsewhere = family_provenance(get_stack("trtllm"), get_device("a10"))
    assert here["gemm"]["status"] == "measured"
    assert elsewhere["gemm"]["status"] == "cross-generation"


def test_roofline_is_roofline_only_everywhere():
    info = family_provenance(get_stack("vllm"), get_device("h100-sxm"), roofline=True)
    assert {e["status"] for e in info.values()} == {"roofline-only"}
