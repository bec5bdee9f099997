"""What a plan may fill (perfcast.train.MemoryBudget): the CUDA-visible bytes of the device,
not its marketed decimal capacity, less the allocator's reserve. Plans that ran must fit;
plans that cannot must still be refused; the budget never exceeds the physical memory."""

import json
import math
from importlib import resources

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.api import TrainRequest, run
from perfcast.errors import InputError
from perfcast.specs import (
    ParallelPlan,
    cuda_total_bytes,
    device_names,
    get_cluster,
    get_device,
    get_model,
    physical_memory_bytes,
)
from perfcast.train import MemoryBudget, TrainJob, forecast_training
from perfcast.validate._training import load_training_points, training_job

GPUS = [n for n in device_names() if get_device(n).kind == "gpu"]
BASE = {"model": "llama-3-8b", "gpu": "h100-sxm", "num_gpus": 8, "zero": 3, "seq_len": 4096,
        "micro_batch": 2}


@pytest.fixture(scope="module")
def mosaicml_ratios():
    """need / budget of every MosaicML llm-foundry configuration that really ran."""
    out = []
    for _, point in load_training_points().iterrows():
        fc = forecast_training(training_job(point))
        out.append((point["point_id"], fc.memory_per_gpu_bytes / fc.capacity_bytes, fc.fits))
    return out


def test_every_configuration_that_ran_fits(mosaicml_ratios):
    assert len(mosaicml_ratios) == 216
    refused = [(pid, round(r, 3)) for pid, r, fits in mosaicml_ratios if not fits]
    assert not refused
    ratios = np.array([r for _, r, _ in mosaicml_ratios])
    # the tightest runs filled most of the GPU (they picked the largest micro-batch)
    assert 0.9 < ratios.max() < 1.0


def test_a_plan_that_clearly_exceeds_the_device_is_refused():
    options = {**BASE, "model": "llama-3-70b", "zero": 0}
    with pytest.raises(InputError) as err:
        run(TrainRequest.from_options(options))
    assert err.value.field == "memory"
    payload = run(TrainRequest.from_options({**options, "allow_oom": True})).payload()
    assert payload["fits"] is False
    assert payload["memory_per_gpu_bytes"] > 2 * payload["capacity_bytes"]
    assert any("gives the allocator" in n for n in payload["notes"])


@pytest.mark.parametrize("name", GPUS)
def test_usable_never_exceeds_physical(name):
    device = get_device(name)
    usable, source = cuda_total_bytes(device)
    assert 0 < usable <= physical_memory_bytes(device)
    assert source
    # the catalog's decimal GB is never above what the CUDA allocator gets where measured
    assert usable >= device.hbm_capacity_bytes or "catalog" not in source


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(GPUS), reserve=st.floats(0.0, 0.9),
       share=st.floats(0.01, 1.2))
def test_budget_never_exceeds_physical(name, reserve, share):
    device = get_device(name)
    top = physical_memory_bytes(device)
    assert MemoryBudget(allocator_reserve=reserve).budget_bytes(device) <= top
    budget = MemoryBudget(usable_bytes=share * top, allocator_reserve=reserve)
    if share * top > top:
        with pytest.raises(InputError) as err:
            budget.check(device)
        assert err.value.field == "memory_budget.usable_bytes"
    else:
        budget.check(device)
        assert budget.budget_bytes(device) <= top


def test_h100_budget_is_its_cuda_total_not_80e9():
    device = get_device("h100-sxm")
    budget = MemoryBudget().budget_bytes(device)
    assert budget == pytest.approx(79.11 * 2**30)  # PyTorch's "total capacity of 79.11 GiB"
    assert 80e9 < budget < 80 * 2**30


@pytest.mark.parametrize(("value", "field"), [
    ({"allocator_reserve": -0.1}, "memory_budget.allocator_reserve"),
    ({"allocator_reserve": 0.95}, "memory_budget.allocator_reserve"),
    ({"allocator_reserve": math.nan}, "memory_budget.allocator_reserve"),
    ({"usable_bytes": 0.0}, "memory_budget.usable_bytes"),
    ({"usable_bytes": -1e9}, "memory_budget.usable_bytes"),
    ({"slack": 1}, "memory_budget.slack"),
])
def test_bad_budget_values_are_refused_by_field(value, field):
    with pytest.raises(InputError) as err:
        MemoryBudget(**value)
    assert err.value.field == field


@pytest.mark.parametrize("value", [-0.1, 0.95, "lots"])
def test_bad_allocator_reserve_option_is_refused_by_name(value):
    with pytest.raises(InputError) as err:
        run(TrainRequest.from_options({**BASE, "allocator_reserve": value}))
    assert err.value.field == "allocator_reserve"


def test_usable_bytes_above_physical_refused_on_the_job(h100x8):
    with pytest.raises(InputError) as err:
        TrainJob(model=get_model("gpt2-medium"), cluster=h100x8,
                 plan=ParallelPlan(dp=8), seq_len=1024,
                 micro_batch=1, global_batch=8,
                 memory_budget=MemoryBudget(usable_bytes=1e12))
    assert err.value.field == "memory_budget.usable_bytes"


def test_inputs_print_the_budget_and_fits_uses_it():
    payload = run(TrainRequest.from_options(BASE)).payload()
    budget = payload["inputs"]["memory_budget"]
    assert budget["budget_bytes"] == payload["capacity_bytes"]
    assert budget["allocator_reserve"] == 0.0
    assert budget["usable_bytes"] <= budget["physical_bytes"]
    need = payload["memory_per_gpu_bytes"]
    reserve = 1 - 0.99 * need / budget["usable_bytes"]  # leaves just under the need
    tight = run(TrainRequest.from_options({**BASE, "allocator_reserve": reserve,
                                            "allow_oom": True})).payload()
    assert tight["fits"] is False
    assert tight["inputs"]["memory_budget"]["allocator_reserve"] == reserve


def test_sweep_fits_column_uses_the_budget():
    options = {"model": "llama-3-8b", "gpu": "h100-sxm", "num_gpus": 8, "sweep": True,
               "global_batch": 64, "seq_len": 4096, "top": 1}
    loose = run(TrainRequest.from_options(options))
    tight = run(TrainRequest.from_options({**options, "allocator_reserve": 0.3}))
    budget = tight.inputs["memory_budget"]["budget_bytes"]
    assert tight.plans["fits"].sum() < loose.plans["fits"].sum()
    assert (tight.plans["fits"] == (tight.plans["memory_per_gpu_bytes"] <= budget)).all()


def test_allocator_reserve_refused_where_unused():
    with pytest.raises(InputError) as err:
        run(TrainRequest.from_options({**BASE, "rlhf": True, "zero": 0,
                                       "allocator_reserve": 0.1}))
    assert err.value.field == "allocator_reserve"
    with pytest.raises(InputError) as err:
        run(TrainRequest.from_options({"model": "resnet50", "gpu": "h100-sxm",
                                       "allocator_reserve": 0.1}))
    assert err.value.field == "allocator_reserve"


def test_shipped_totals_name_catalog_devices_with_sources():
    doc = json.loads((resources.files("perfcast.specs") / "data" / "gpu_memory.json")
                     .read_text())
    assert doc["nvml_to_cuda_gap_bytes"] > 0
    for name, row in doc["devices"].items():
        assert name in GPUS
        assert row["source"]
        assert ("cuda_total_bytes" in row) != ("nvml_total_mib" in row)
    assert get_cluster("dgx-h100", 8).device.name in doc["devices"]
