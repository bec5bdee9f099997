"""Measured NCCL terms of one interconnect level: fixed cost, per-step alpha and a bus
efficiency that grows with message size (shipped in comm/data/nccl_fits.json, written by
scripts/fit_collectives.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np

__all__ = ["LinkFit", "shipped_link_fits"]


@dataclass(frozen=True)
class LinkFit:
    """Collective terms fitted on one GPU's measured NCCL collectives over one link kind.

    Bus efficiency (measured bus bandwidth / link bandwidth) of a collective in which every GPU
    sends `traffic` bytes over a group of `g` GPUs:
        eta = ceiling(g) / (1 + (half_bytes / traffic) ** exponent),
    traffic held at `max_bytes` (the largest measured) so the curve never extrapolates upward;
    ceiling(g) interpolated in log2 g between the measured group sizes, clamped outside them.
    Send/recv: t = p2p_base_s + bytes / (bandwidth x p2p_efficiency) where measured (NCCL's
    point-to-point path ramps up much faster than its collectives).
    """

    kind: str
    base_s: float
    alpha_s: float
    group_sizes: tuple[float, ...]
    ceiling: tuple[float, ...]
    half_bytes: float
    exponent: float
    max_bytes: float
    p2p_base_s: float | None = None
    p2p_efficiency: float | None = None
    measured_device: str = ""
    source: str = ""

    def ceiling_for(self, group: np.ndarray) -> np.ndarray:
        """Large-message efficiency ceiling of a group of `group` GPUs."""
        return np.interp(np.log2(np.maximum(np.asarray(group, dtype=float), 2.0)),
                         np.log2(self.group_sizes), self.ceiling)

    def efficiency(self, traffic_bytes: np.ndarray, group: np.ndarray | float,
                   ceiling: np.ndarray | None = None) -> np.ndarray:
        """Bus efficiency per row, in (0, 1] (`ceiling`: ceiling_for(group), precomputed)."""
        x = np.clip(np.asarray(traffic_bytes, dtype=float), 1.0, self.max_bytes)
        top = self.ceiling_for(group) if ceiling is None else ceiling
        return top / (1.0 + (self.half_bytes / x) ** self.exponent)

    def to_json(self) -> dict:
        return {"kind": self.kind, "base_s": self.base_s, "alpha_s": self.alpha_s,
                "group_sizes": list(self.group_sizes), "ceiling": list(self.ceiling),
                "half_bytes": self.half_bytes, "exponent": self.exponent,
                "max_bytes": self.max_bytes, "p2p_base_s": self.p2p_base_s,
                "p2p_efficiency": self.p2p_efficiency,
                "measured_device": self.measured_device, "source": self.source}

    @classmethod
    def from_json(cls, entry: dict) -> LinkFit:
        return cls(**{**entry, "group_sizes": tuple(entry["group_sizes"]),
                      "ceiling": tuple(entry["ceiling"])})


@cache
def _shipped() -> tuple[dict[str, LinkFit], str]:
    doc = json.loads((resources.files("perfcast.comm") / "data" / "nccl_fits.json").read_text())
    return ({name: LinkFit.from_json(e) for name, e in doc["links"].items()},
            doc.get("nvls", ""))


def shipped_link_fits() -> dict[str, LinkFit]:
    """Catalog GPU name -> its fitted intra-node terms (a copy: callers may edit it)."""
    return dict(_shipped()[0])


def nvls_note() -> str:
    """What the measured all-reduces say about NVLink SHARP (NVLS): the check the fit script
    runs, and how the NVLS term (priced from NCCL's algorithm, comm/_levels.py) compares
    with the data."""
    return _shipped()[1]
