"""The per-framework measurement stores (kernels_vllm.parquet, kernels_sglang.parquet)."""

from importlib import resources

import pandas as pd
import pytest

from perfcast.errors import InputError
from perfcast.kernels import KERNEL_SOURCES, calibration_devices, devices_by_family
from perfcast.measure import STORE_COLUMNS, load_store

FRAMEWORKS = ("vllm", "sglang")


@pytest.mark.parametrize("source", FRAMEWORKS)
def test_framework_store_schema_and_content(source):
    store = load_store(source=source)
    assert list(store.columns) == list(STORE_COLUMNS)
    assert set(store["source"]) == {f"aiconfigurator-{source}"}
    assert set(store["family"]) == {"gemm", "attn_prefill", "attn_decode", "moe"}
    assert (store["latency_s"] > 0).all() and (store["timing"] == "cuda_graph").all()
    attn = store[store["family"].str.startswith("attn")]
    assert "attn" not in set(attn["op"])  # the kernel source, not TensorRT-LLM's name
    path = resources.files("perfcast.measure") / "data" / KERNEL_SOURCES[source].store_file
    assert len(path.read_bytes()) < 6_000_000


@pytest.mark.parametrize("source", FRAMEWORKS)
def test_provenance_devices_match_the_store(source):
    """calibration_devices reads the fit-time record; it must agree with the store, and
    linear_attn's (fitted on the Gated DeltaNet slice, validate/data/aic_gdn_slice.csv,
    by scripts/fit_linear_attn.py) with that slice."""
    recorded = dict(calibration_devices(source))
    gdn = pd.read_csv(resources.files("perfcast.validate") / "data" / "aic_gdn_slice.csv")
    assert recorded.pop("linear_attn") == tuple(sorted(set(gdn.loc[gdn["stack"] == source,
                                                                   "device"])))
    assert recorded == {f: tuple(d) for f, d in devices_by_family(
        load_store(source=source)).items()}


def test_default_store_unchanged_by_source_argument():
    assert load_store(source="default").equals(load_store())
    assert set(load_store()["source"]) >= {"aiconfigurator", "neusight", "vidur"}


def test_unknown_store_source():
    with pytest.raises(InputError):
        load_store(source="tensorrt")
