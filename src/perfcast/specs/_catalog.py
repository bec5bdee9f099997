"""The shipped catalogs: GPUs, CPU targets, cluster presets and model configs, looked up by
forgiving names.

Every name or alias names exactly one entry. A short name that fits several entries (`A100`:
SXM4 or PCIe, 40 or 80 GB) is declared in its file's `ambiguous` section with its candidates
and refused with all of them listed, never resolved to one silently. Both rules are checked
when a catalog loads.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perfcast.errors import (
    AmbiguousName,
    InputError,
    close_matches,
    from_validation_error,
    read_user_json,
)
from perfcast.specs._cluster import Cluster, Link, LinkKind
from perfcast.specs._device import Device
from perfcast.specs._dtype import DType, bytes_per_element
from perfcast.specs._model import ModelSpec

__all__ = [
    "CpuCores", "cluster_for", "cpu_cores", "device_names", "get_cluster", "get_device",
    "get_model", "cluster_names", "load_model_config", "model_entries", "model_names",
]

_DATA = resources.files("perfcast.specs") / "data"


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def _read_json(name: str) -> Any:
    return json.loads((_DATA / name).read_text())


@dataclass(frozen=True)
class _Names:
    """One catalog's lookup keys: the entry each name or alias names, and the candidates of
    each declared ambiguous name."""

    index: Mapping[str, str]
    ambiguous: Mapping[str, tuple[str, ...]]

    def find(self, field: str, name: str) -> str | None:
        """The canonical name, None when unknown; an ambiguous name is refused listing every
        candidate."""
        candidates = self.ambiguous.get(_key(name))
        if candidates is not None:
            raise AmbiguousName(field, name, candidates)
        return self.index.get(_key(name))

    def near(self, name: str, n: int = 6) -> list[str]:
        """Entries whose names, aliases or ambiguous short names are closest to a misspelt
        one, best first (an ambiguous name brings all its candidates)."""
        keys = [*self.index, *self.ambiguous]
        hits = close_matches(_key(name), keys, n=n)
        found = [e for k in hits for e in self.ambiguous.get(k, (self.index.get(k),))]
        return list(dict.fromkeys(found))


def _names(source: str, entries: Iterable[tuple[str, list[str]]],
           ambiguous: Mapping[str, list[str]]) -> _Names:
    """The lookup keys of (name, aliases) rows and the declared ambiguous names, refused on
    load when a key names two entries, or an ambiguous name is also a name or alias, or lists
    fewer than two candidates or one that is not an entry."""
    index: dict[str, str] = {}
    for name, aliases in entries:
        for alias in [name, *aliases]:
            owner = index.setdefault(_key(alias), name)
            if owner != name:
                raise InputError(f"{source}:{name}.aliases", f"{alias!r} also names {owner}",
                                 "one entry per name; shared names go under `ambiguous`")
    declared: dict[str, tuple[str, ...]] = {}
    known = set(index.values())
    for name, candidates in ambiguous.items():
        field = f"{source}:ambiguous.{name}"
        if _key(name) in index or _key(name) in declared:
            raise InputError(field, f"{name!r} is also an entry's name or alias, or declared "
                             "twice", "a name no entry answers to, declared once")
        unknown = [c for c in candidates if c not in known]
        if unknown or len(set(candidates)) < 2:
            raise InputError(field, f"candidates {candidates} must be two or more catalog "
                             f"entries (unknown: {unknown})", sorted(known))
        declared[_key(name)] = tuple(candidates)
    return _Names(MappingProxyType(index), MappingProxyType(declared))


def _resolve(kind: str, name: str, names: _Names, canonical: list[str]) -> str:
    hit = names.find(kind, name)
    if hit is None:
        hint = close_matches(name, canonical) or canonical[:8]
        raise InputError(kind, f"unknown {kind} {name!r}; did you mean {', '.join(hint)}?",
                         f"`perfcast {'models' if kind == 'model' else 'hardware list'}`")
    return hit


class CpuCores(BaseModel):
    """What a CPU target's peak is made of beyond its Device fields (cores = `sm_count`, clock =
    `boost_clock_hz`): peak = cores x clock x (simd_bits / dtype bits) x fma_units x 2."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    simd_bits: int = Field(gt=0, description="vector datapath width of one FMA pipe, bits")
    fma_units: int = Field(gt=0, description="FMA-capable vector pipes per core")
    sources: dict[str, str] = Field(default_factory=dict)

    def peak_flops(self, device: Device, dtype: DType | str) -> float:
        """The derived dense peak FLOP/s of `device` for one dtype, all cores busy."""
        lanes = self.simd_bits / (8 * bytes_per_element(dtype))
        return device.sm_count * (device.boost_clock_hz or 0.0) * lanes * self.fma_units * 2


def _cpu_entry(entry: dict) -> tuple[Device, CpuCores]:
    """A cpus.json row, refused when a listed peak is not the one its own fields derive."""
    device, cores = Device(**entry["device"]), CpuCores(**entry["cores"])
    for dtype, flops in device.dense_peak_flops.items():
        derived = cores.peak_flops(device, dtype)
        if not math.isclose(flops, derived, rel_tol=1e-9):
            raise InputError(f"cpus.json:{device.name}.dense_peak_flops.{dtype.value}",
                             f"{flops:g} differs from the derived {derived:g}",
                             "cores x clock x SIMD lanes x FMA units x 2")
    return device, cores


@cache
def _devices() -> tuple[dict[str, Device], _Names]:
    """GPUs and CPU targets share one namespace (the `gpu` option takes either)."""
    gpus = _read_json("gpus.json")
    devices = {d.name: d for d in (Device(**e["device"]) for e in gpus["devices"])}
    rows = [(e["device"]["name"], e["aliases"]) for e in gpus["devices"]]
    for name, (device, _, aliases) in _cpus().items():
        devices[name] = device
        rows.append((name, aliases))
    ambiguous = {**gpus["ambiguous"], **_read_json("cpus.json")["ambiguous"]}
    return devices, _names("gpus.json+cpus.json", rows, ambiguous)


@cache
def _cpus() -> dict[str, tuple[Device, CpuCores, list[str]]]:
    """The CPU targets of cpus.json (hand-written, every field sourced), checked on load."""
    out = {}
    for entry in _read_json("cpus.json")["devices"]:
        device, cores = _cpu_entry(entry)
        out[device.name] = (device, cores, entry["aliases"])
    return out


def _resolve_device(name: str) -> str:
    """The canonical name of a catalog GPU or CPU. A miss names both kinds and suggests the
    closest names and aliases of either (field `gpu`, the CLI option that takes it)."""
    devices, names = _devices()
    hit = names.find("gpu", name)
    if hit is not None:
        return hit
    hint = names.near(name)[:3]
    cpus = list(_cpus())
    gpus = [d for d in devices if d not in cpus]
    hint = hint or [*gpus[:4], *cpus[:2]]
    raise InputError("gpu", f"unknown gpu or cpu device {name!r}; did you mean "
                     f"{', '.join(hint)}?", f"`perfcast hardware list`: {len(gpus)} GPUs, "
                     f"{len(cpus)} CPUs ({', '.join(cpus)})")


def cpu_cores(name: str) -> CpuCores:
    """SIMD width and FMA units of a catalog CPU target (`epyc-9654`, `cortex-a76`, `m2`)."""
    canonical = _resolve_device(name)
    cpus = _cpus()
    if canonical not in cpus:
        raise InputError("cpu", f"{canonical} is not a CPU target", list(cpus))
    return cpus[canonical][1]


def device_names() -> list[str]:
    return list(_devices()[0])


def get_device(name: str) -> Device:
    """A catalog GPU or CPU target by name or alias (`h100-sxm`, `NVIDIA H100 80GB HBM3`,
    `epyc-9654`); an ambiguous short name (`H100`) is refused listing its candidates."""
    return _devices()[0][_resolve_device(name)]


@cache
def _clusters() -> tuple[dict[str, dict], _Names]:
    data = _read_json("clusters.json")
    presets = {entry["name"]: entry for entry in data["clusters"]}
    rows = [(name, entry["aliases"]) for name, entry in presets.items()]
    return presets, _names("clusters.json", rows, data["ambiguous"])


def cluster_names() -> list[str]:
    return list(_clusters()[0])


def get_cluster(name: str, num_gpus: int | None = None) -> Cluster:
    """A preset node type, scaled to enough nodes for `num_gpus`."""
    presets, names = _clusters()
    entry = dict(presets[_resolve("cluster", name, names, list(presets))])
    per_node = entry["gpus_per_node"]
    nodes = 1 if num_gpus is None else math.ceil(num_gpus / per_node)
    return Cluster(
        name=entry["name"], device=get_device(entry["device"]), gpus_per_node=per_node,
        num_nodes=nodes, intra_node=Link(**entry["intra_node"]),
        inter_node=Link(**entry["inter_node"]) if entry["inter_node"] else None,
        sources=entry["sources"],
    )


def cluster_for(device: Device, num_gpus: int = 1) -> Cluster:
    """The preset built from this GPU, or a generic box (8 per node, NVLink else PCIe)."""
    presets, _ = _clusters()
    for entry in presets.values():
        if entry["device"] == device.name:
            return get_cluster(entry["name"], num_gpus)
    if device.nvlink_bandwidth_bps:
        intra = Link(kind=LinkKind.NVLINK, bandwidth_bps=device.nvlink_bandwidth_bps,
                     latency_s=2.5e-6)
    else:
        intra = Link(kind=LinkKind.PCIE, bandwidth_bps=device.pcie_bandwidth_bps or 16e9,
                     latency_s=5e-6)
    per_node = 8
    return Cluster(
        name=f"generic-{device.name}", device=device, gpus_per_node=per_node,
        num_nodes=math.ceil(num_gpus / per_node), intra_node=intra,
        inter_node=Link(kind=LinkKind.INFINIBAND, bandwidth_bps=25e9, latency_s=5e-6),
        sources={"all": "generic box: device link bandwidth, HDR InfiniBand between nodes"},
    )


@cache
def _model_index() -> tuple[dict[str, dict], _Names]:
    data = _read_json("models/index.json")
    entries = {entry["name"]: entry for entry in data["models"]}
    rows = [(name, entry.get("aliases", [])) for name, entry in entries.items()]
    return entries, _names("models/index.json", rows, data["ambiguous"])


def model_names() -> list[str]:
    return list(_model_index()[0])


def model_entries(search: str | None = None) -> list[dict]:
    """Catalog rows: name, hf_id, aliases, params_b, source; with `search`, the rows whose
    name, HF id, alias, family or config model_type contains it (case and -/_ ignored)."""
    rows = list(_model_index()[0].values())
    if search is None:
        return rows
    needle = _key(search)
    if not needle:
        raise InputError("search", "is empty", "a part of a model name, HF id or family")

    def text(entry: dict) -> list[str]:
        config = load_model_config(entry["name"])
        inner = config.get("text_config") or {}
        return [entry["name"], entry.get("hf_id") or "", entry.get("family") or "",
                *entry.get("aliases", []), str(config.get("model_type", "")),
                str(inner.get("model_type", ""))]
    return [e for e in rows if any(needle in _key(t) for t in text(e))]


def load_model_config(name: str) -> dict[str, Any]:
    """The shipped config.json of a catalog model."""
    entries, names = _model_index()
    return json.loads(_config_text(_resolve("model", name, names, list(entries))))


def _config_text(canonical: str) -> str:
    return (_DATA / "models" / canonical / "config.json").read_text()


def get_model(name: str | None = None, config_path: str | Path | None = None) -> ModelSpec:
    """A ModelSpec from a catalog name or from any HF config.json file."""
    if (name is None) == (config_path is None):
        raise InputError("model", "give exactly one of --model or --model-config",
                         "a catalog name or a config.json path")
    if config_path is None:
        entries, names = _model_index()
        label = _resolve("model", name, names, list(entries))
        return _catalog_spec(label, _config_text(label))
    path = Path(config_path)
    config = read_user_json(path, "model_config", "a HuggingFace config.json")
    return _spec(config, path.parent.name if path.name == "config.json" else path.stem)


@lru_cache(maxsize=256)
def _catalog_spec(label: str, text: str) -> ModelSpec:
    """A catalog model's spec, built once per config text (resolving requests asks for the
    same few models thousands of times; keyed by the text, an edited file is read anew).
    Specs are frozen, so callers share one."""
    return _spec(json.loads(text), label)


def _spec(config: dict[str, Any], label: str) -> ModelSpec:
    _check_sizes(config)
    try:
        return ModelSpec.from_hf_config(config, name=label)
    except ValidationError as exc:
        raise from_validation_error(exc, prefix="model_config.", default="config") from None
    except InputError:
        raise
    except (TypeError, ValueError, KeyError, ZeroDivisionError, AttributeError) as exc:
        raise InputError("model_config", f"not a config perfcast can read ({exc})",
                         "a HuggingFace config.json") from None


# HF config fields that are counts or sizes, under the names the supported families use
_SIZE_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
              "intermediate_size", "vocab_size", "max_position_embeddings", "head_dim",
              "n_embd", "n_layer", "n_head", "n_positions", "d_model", "n_heads", "n_layers",
              "num_local_experts", "num_experts_per_tok", "moe_intermediate_size")


def _check_sizes(config: dict) -> None:
    """Counts and sizes must be positive integers; named here before any arithmetic on them."""
    for key in _SIZE_KEYS:
        value = config.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise InputError(f"model_config.{key}", f"must be a positive integer, got "
                             f"{value!r}", ">= 1")
