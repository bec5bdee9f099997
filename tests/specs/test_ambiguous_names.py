"""A short name that fits several catalog entries (`a100`: SXM4 or PCIe, 40 or 80 GB) is
refused listing every candidate, never resolved to one of them; every other name or alias
names exactly one entry (checked when a catalog loads)."""

import json
import shutil
from importlib import resources

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from perfcast.cli import app
from perfcast.errors import InputError
from perfcast.specs import _catalog as catalog
from perfcast.specs import get_cluster, get_device, get_model

DATA = resources.files("perfcast.specs") / "data"


def _json(name: str) -> dict:
    return json.loads((DATA / name).read_text())


GPUS, CPUS, CLUSTERS = _json("gpus.json"), _json("cpus.json"), _json("clusters.json")
MODELS = _json("models/index.json")
# field -> (lookup, {entry: its names}, declared ambiguous names)
CATALOGS = {
    "gpu": (get_device,
            {e["device"]["name"]: [e["device"]["name"], *e["aliases"]]
             for e in [*GPUS["devices"], *CPUS["devices"]]},
            {**GPUS["ambiguous"], **CPUS["ambiguous"]}),
    "cluster": (get_cluster, {e["name"]: [e["name"], *e["aliases"]] for e in
                              CLUSTERS["clusters"]}, CLUSTERS["ambiguous"]),
    "model": (get_model, {e["name"]: [e["name"], *e.get("aliases", [])] for e in
                          MODELS["models"]}, MODELS["ambiguous"]),
}
AMBIGUOUS = [(field, name, candidates) for field, (_, _, declared) in CATALOGS.items()
             for name, candidates in declared.items()]
OWNED = [(field, alias, entry) for field, (_, entries, _) in CATALOGS.items()
         for entry, names in entries.items() for alias in names]
runner = CliRunner()


def test_the_issue_names_are_declared_ambiguous():
    declared = {(f, n.lower()) for f, n, _ in AMBIGUOUS}
    assert {("gpu", "a100"), ("gpu", "a100-80gb"), ("gpu", "a100-pcie"), ("gpu", "a100-sxm"),
            ("gpu", "h100"), ("gpu", "h100-80gb"), ("gpu", "v100"), ("cluster", "nvl72"),
            ("cluster", "hgx-a100"), ("model", "gpt3")} <= declared


@pytest.mark.parametrize("field, name, candidates", AMBIGUOUS, ids=lambda v: str(v))
def test_an_ambiguous_name_is_refused_listing_every_candidate(field, name, candidates):
    lookup = CATALOGS[field][0]
    for spelling in (name, name.lower(), f" {name.upper()} ", name.replace("-", "_")):
        with pytest.raises(InputError) as err:
            lookup(spelling)
        assert err.value.field == field
        assert f"is ambiguous: {', '.join(candidates)}" in str(err.value)


def test_cli_gpu_a100_exits_2_listing_the_four_a100s():
    res = runner.invoke(app, ["infer", "--model", "llama-2-7b", "--gpu", "a100"])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert ("gpu: 'a100' is ambiguous: a100-sxm4-40gb, a100-sxm4-80gb, a100-pcie-40gb, "
            "a100-pcie-80gb") in text


def test_cli_cluster_nvl72_exits_2_listing_both_racks():
    res = runner.invoke(app, ["infer", "--model", "llama-2-7b", "--cluster", "nvl72"])
    assert res.exit_code == 2, res.output
    assert "cluster: 'nvl72' is ambiguous: gb200-nvl72, gb300-nvl72" in " ".join(
        res.output.split())


@pytest.mark.parametrize("name, entry", [
    ("a100-sxm4-80gb", "a100-sxm4-80gb"), ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
    ("NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb"), ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
    ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"), ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("H100-SXM5-80GB", "h100-sxm"), ("NVIDIA H100 PCIe", "h100-pcie"),
    ("Tesla V100-SXM2-32GB", "v100-sxm2-32gb"), ("Tesla V100-PCIE-32GB", "v100-pcie-32gb"),
    ("v100-sxm2-32gb", "v100-sxm2-32gb"), ("NVIDIA H200", "h200-sxm"),
])
def test_full_names_and_vendor_strings_resolve(name, entry):
    assert get_device(name).name == entry


def test_full_cluster_and_model_names_resolve():
    assert get_cluster("gb300-nvl72").name == "gb300-nvl72"
    assert get_cluster("GB200 NVL72").name == "gb200-nvl72"
    assert get_cluster("dgx-a100-40gb").name == "dgx-a100-40gb"
    assert get_model("gpt3-175b").name == "gpt3-175b" and get_model("gpt2").name == "gpt2"


@given(st.sampled_from(OWNED), st.sampled_from([str, str.upper, str.lower,
                                                 lambda s: f"  {s} ",
                                                 lambda s: s.replace("-", "_")]))
def test_every_name_and_alias_resolves_to_the_one_entry_that_lists_it(owned, spelling):
    field, alias, entry = owned
    lookup = CATALOGS[field][0]
    assert lookup(spelling(alias)).name == entry


def test_no_lookup_key_is_listed_by_two_entries_or_also_declared_ambiguous():
    for field, (_, entries, declared) in CATALOGS.items():
        owners: dict[str, set[str]] = {}
        for entry, names in entries.items():
            for name in names:
                owners.setdefault(catalog._key(name), set()).add(entry)
        assert {k: v for k, v in owners.items() if len(v) > 1} == {}, field
        assert not {catalog._key(n) for n in declared} & set(owners), field
        for candidates in declared.values():
            assert set(candidates) <= set(entries) and len(set(candidates)) >= 2


@pytest.fixture
def broken_catalog(tmp_path, monkeypatch):
    """A copy of the shipped data folder the test may break; caches cleared around it."""
    folder = tmp_path / "data"
    shutil.copytree(str(DATA), folder)
    monkeypatch.setattr(catalog, "_DATA", folder)
    for loader in (catalog._devices, catalog._cpus, catalog._clusters, catalog._model_index):
        loader.cache_clear()
    yield folder
    monkeypatch.undo()
    for loader in (catalog._devices, catalog._cpus, catalog._clusters, catalog._model_index):
        loader.cache_clear()


def _rewrite(path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_loading_refuses_an_alias_two_entries_list(broken_catalog):
    _rewrite(broken_catalog / "clusters.json",
             lambda d: d["clusters"][1]["aliases"].append("DGX A100"))
    with pytest.raises(InputError, match="'DGX A100' also names dgx-a100"):
        get_cluster("dgx-h100")


@pytest.mark.parametrize("declared, problem", [
    ({"H100-SXM5-80GB": ["h100-sxm", "h100-pcie"]}, "also an entry's name or alias"),
    ({"H100": ["h100-sxm", "h100-nvl"]}, "unknown: ['h100-nvl']"),
    ({"H100": ["h100-sxm"]}, "two or more"),
])
def test_loading_refuses_a_bad_ambiguous_declaration(broken_catalog, declared, problem):
    _rewrite(broken_catalog / "gpus.json", lambda d: d.update(ambiguous=declared))
    with pytest.raises(InputError, match="gpus.json") as err:
        get_device("t4")
    assert problem in str(err.value)
