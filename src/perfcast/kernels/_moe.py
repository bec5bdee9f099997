"""Fused MoE layers: how routing skew loads the experts of one GPU, and the physical terms of
the layer (grouped up/gate GEMM, activation, grouped down GEMM, routing and permute kernels).

Three physical effects set a MoE layer's time beyond its dense FLOPs:
- load imbalance: with expert parallelism the layer waits on the most loaded EP rank, which
  receives more than its T·topk/ep share of routed tokens when routing is skewed;
- weights are read once per *active* expert (one that receives at least one token), so a
  skewed router that concentrates few tokens on few experts reads fewer weight bytes;
- each expert's token rows are padded to whole GEMM tiles, so many lightly loaded experts
  waste more tile rows than a few heavily loaded ones.
Routing/permute/finalize kernels are a fixed cost per kernel variant (the family's t_fixed).

Per-expert loads follow AIConfigurator's collector (aiconfigurator collector/helper.py
`_generate_power_law_distribution`, `balanced_logits`): the measured GPU is EP rank 0, which for
power-law routing is swapped to be the most loaded rank. The expectation over a few seeded
draws is used, so results are deterministic.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.specs import Device, bytes_per_element

__all__ = ["DEFAULT_DISTRIBUTION", "MOE_FAMILY", "ExpertLoad", "MoeRouting", "expert_load",
           "moe_loads", "moe_terms", "parse_routing", "rank_load"]

MOE_FAMILY = "moe"
# Rows without a routing configuration (perfcast.ops `_moe` expert GEMM rows) are priced as
# routed evenly: their b (active experts) and m (tokens per active expert) already assume it.
DEFAULT_DISTRIBUTION = "balanced"
DRAWS = 8  # power-law draws averaged per configuration
TILE_ROWS = (64.0, 128.0)  # grouped-GEMM tile heights (CUTLASS MoE GEMM M tiles)
TILE_COLS = 128.0


@dataclass(frozen=True)
class MoeRouting:
    """The routing configuration of a fused MoE measurement (AIConfigurator op label)."""

    kernel: str
    distribution: str
    experts: int
    topk: int
    tp: int
    ep: int

    @property
    def matrices(self) -> int:
        """Weight matrices per expert: gate, up, down (gated) or up, down (`nongated`)."""
        return 2 if "nongated" in self.kernel else 3


@lru_cache(maxsize=1 << 16)
def parse_routing(op: str) -> MoeRouting | None:
    """`<kernel>:<distribution>:E<experts>:top<k>:tp<t>:ep<e>[/suffixes]`, else None (each
    label parsed once: a store repeats a few thousand labels over ~10^5 rows)."""
    parts = str(op).split("/", 1)[0].split(":")
    if len(parts) != 6:
        return None
    try:
        return MoeRouting(parts[0], parts[1], int(parts[2][1:]), int(parts[3][3:]),
                          int(parts[4][2:]), int(parts[5][2:]))
    except ValueError:
        return None


def _power_law_draws(tokens: int, experts: int, topk: int, alpha: float, rng,
                     draws: int) -> np.ndarray:
    """(draws, experts) tokens per expert, each row summing to tokens·topk: aiconfigurator's
    `sample_power_law` draw (inverse CDF of a power law on [lo, hi]), its rounding and
    top-up. Each draw takes `experts` uniforms for the sample, then `experts` to break ties
    among equal rounded loads (mostly zeros when tokens·topk < E: topped up in no particular
    order, not by expert index, which would pile the top-up onto EP rank 0); all draws' come
    from one call, in that order."""
    lo, hi = (1.0, tokens * 0.8) if tokens * topk > experts else (0.01, 2.0)
    hi = max(hi, lo * 1.0001)
    u = rng.random((draws, 2, experts))
    x = ((hi ** (1 - alpha) - lo ** (1 - alpha)) * u[:, 0] + lo ** (1 - alpha)) ** (
        1 / (1 - alpha))
    loads = np.rint(x / x.sum(axis=1, keepdims=True) * tokens * topk).astype(np.int64)
    deltas = tokens * topk - loads.sum(axis=1)
    orders = np.argsort(-(loads + 0.5 * u[:, 1]), axis=1, kind="stable")
    for row, order, delta in zip(loads, orders, deltas.tolist(), strict=True):
        if delta > 0:
            q, r = divmod(delta, experts)
            row += q
            row[order[:r]] += 1
        elif delta < 0:
            positive = order[row[order] > 0][::-1]  # smallest non-empty experts first
            row[positive[:-delta]] -= 1
    return loads


def _balanced_loads(tokens: int, experts: int, topk: int) -> np.ndarray:
    """aiconfigurator `balanced_logits`: token i's j-th expert is (i + j·stride) mod E."""
    stride = -(-experts // topk)
    i = np.arange(tokens, dtype=float)[:, None]
    j = np.arange(topk, dtype=float)[None, :]
    ids = (i + j * stride) if tokens >= stride else (i * stride / tokens + j * stride)
    return np.bincount(np.floor(np.mod(ids, experts)).astype(np.int64).ravel(),
                       minlength=experts)


@lru_cache(maxsize=200_000)
def rank_load(tokens: int, experts: int, topk: int, ep: int, distribution: str
              ) -> tuple[float, float, float, float, float]:
    """Expected (routed rows, active experts, heaviest expert's rows, 64-row tiles, 128-row
    tiles) on the measured EP rank: rank 0 for balanced routing, the most loaded rank for
    power-law routing."""
    local = max(experts // max(ep, 1), 1)
    if distribution.startswith("power_law_"):
        alpha = float(distribution.removeprefix("power_law_"))
        rng = np.random.default_rng(zlib.crc32(f"{tokens}:{experts}:{topk}:{ep}:{alpha}".encode()))
        draws = _power_law_draws(tokens, experts, topk, alpha, rng, DRAWS)
        ranks = draws[:, : local * (experts // local)].reshape(DRAWS, -1, local)
        mine = ranks[np.arange(DRAWS), np.argmax(ranks.sum(axis=2), axis=1)]
    else:
        mine = _balanced_loads(tokens, experts, topk)[None, :local]
    stats = np.column_stack([mine.sum(axis=1), (mine > 0).sum(axis=1), mine.max(axis=1),
                             np.ceil(mine / TILE_ROWS[0]).sum(axis=1),
                             np.ceil(mine / TILE_ROWS[1]).sum(axis=1)]).astype(float)
    return tuple(float(v) for v in np.mean(stats, axis=0))


@dataclass(frozen=True)
class ExpertLoad:
    """Routed token rows on the most loaded EP rank (the one every rank waits for) under a
    named routing distribution, its active experts and heaviest expert, and `skew`: its rows
    over the mean tokens·topk/ep (1 for perfectly balanced routing)."""

    routed_rows: float
    active_experts: float
    heaviest_expert_rows: float
    skew: float


def expert_load(tokens: int, experts: int, topk: int, ep: int = 1,
                distribution: str = DEFAULT_DISTRIBUTION) -> ExpertLoad:
    """Expected expert load of one MoE layer's hottest EP rank. `distribution`: `balanced`
    or `power_law_<alpha>` (AIConfigurator's names: 1.01 mild, 1.2 strong skew)."""
    if min(tokens, experts, topk, ep) < 1 or experts % ep or topk > experts:
        raise InputError("moe routing", f"tokens={tokens}, experts={experts}, topk={topk}, "
                         f"ep={ep}", "positive integers, topk <= experts, ep dividing experts")
    if distribution != "balanced" and not distribution.startswith("power_law_"):
        raise InputError("distribution", f"got {distribution!r}",
                         ["balanced", "power_law_<alpha>"])
    routed, active, heaviest, _, _ = rank_load(int(tokens), int(experts), int(topk), int(ep),
                                               distribution)
    return ExpertLoad(routed, active, heaviest, routed / (tokens * topk / ep))


def _row_loads(ops: pd.DataFrame, routes: list[MoeRouting | None]) -> np.ndarray:
    """(routed, active, heaviest, tiles64, tiles128) per row; rows without a routing config
    (op-table expert GEMMs) are b experts of m rows each."""
    b, m = ops["b"].to_numpy(dtype=float), ops["m"].to_numpy(dtype=float)
    out = np.empty((len(ops), 5))
    for i, route in enumerate(routes):
        if route is None:
            rows = np.ceil(m[i]) if m[i] >= 1 else m[i]
            out[i] = (b[i] * m[i], b[i], m[i], b[i] * np.ceil(rows / TILE_ROWS[0]),
                      b[i] * np.ceil(rows / TILE_ROWS[1]))
            continue
        # the store keeps b = active experts, m = T·topk/ep / b: tokens T come back from them
        tokens = max(int(round(b[i] * m[i] * route.ep / route.topk)), 1)
        out[i] = rank_load(tokens, route.experts, route.topk, route.ep, route.distribution)
    return out


def moe_loads(ops: pd.DataFrame) -> np.ndarray:
    """(routed rows, active experts, heaviest expert's rows, 64-row tiles, 128-row tiles) on
    the measured EP rank, per MoE row."""
    return _row_loads(ops, [parse_routing(o) for o in ops["op"].to_numpy(dtype=object)])


def _wave_padding(tiles_by_height: np.ndarray, cols: np.ndarray, real_rows: np.ndarray,
                  sms: float) -> np.ndarray:
    """Padded / real work of a grouped GEMM for the best tile height: whole row tiles per
    expert, whole column tiles, whole waves over the SMs (as perfcast.kernels._roofline)."""
    best = np.full(len(cols), np.inf)
    col_tiles = np.ceil(np.maximum(cols, 1.0) / TILE_COLS)
    for h, tiles in zip(TILE_ROWS, tiles_by_height.T, strict=True):
        blocks = np.maximum(tiles * col_tiles, 1.0)
        padded = np.ceil(blocks / sms) * sms * h * TILE_COLS
        best = np.minimum(best, padded / np.maximum(real_rows * cols, 1e-9))
    return np.maximum(best, 1.0)


def moe_terms(ops: pd.DataFrame, device: Device, peak_flops_s: np.ndarray
              ) -> dict[str, np.ndarray]:
    """Compute seconds, memory bytes and thread blocks of MoE rows on `device`.

    Store rows (op with a routing config) are a whole gated layer: n = (matrices-1)·inter,
    k = hidden. Op-table rows (no config) are one grouped GEMM of b experts: n, k as given."""
    routes = [parse_routing(o) for o in ops["op"].to_numpy(dtype=object)]
    loads = _row_loads(ops, routes)
    routed, active = loads[:, 0], loads[:, 1]
    n, k = ops["n"].to_numpy(dtype=float), ops["k"].to_numpy(dtype=float)
    mats = np.array([r.matrices if r else 1 for r in routes], dtype=float)
    layer = np.array([r is not None for r in routes])
    inter = np.where(layer, n / np.maximum(mats - 1.0, 1.0), n)
    w_b = _weight_bytes(ops)
    a_b = _per_dtype_bytes(ops["dtype"].to_numpy(dtype=object))
    sms = float(device.sm_count)
    up = _wave_padding(loads[:, 3:5], n, routed, sms)
    # layer rows: up/gate GEMM (n wide, k deep) then down GEMM (hidden wide, inter deep)
    down = _wave_padding(loads[:, 3:5], k, routed, sms)
    flops_up, flops_down = 2.0 * routed * n * k, 2.0 * routed * inter * k
    t_compute = np.where(layer, flops_up * up + flops_down * down, flops_up * up) / peak_flops_s
    weights = active * np.where(layer, mats * k * inter, n * k) * w_b
    acts = np.where(layer, routed * (k * a_b + 2.0 * inter * 2.0 + k * 2.0),
                    routed * (k * a_b + n * 2.0))
    # thread blocks of 64x64 output tiles: up GEMM, plus the down GEMM (hidden wide, only
    # inter deep: under tensor parallelism its many tiles run short main loops)
    tiles = loads[:, 3] * (np.ceil(np.maximum(n, 1.0) / 64.0)
                           + np.where(layer, np.ceil(k / 64.0), 0.0))
    return {"t_compute": t_compute, "bytes": weights + acts, "blocks": np.maximum(tiles, 1.0),
            "heaviest_rows": loads[:, 2], "routed_rows": routed, "active_experts": active,
            "expert_width": inter}


def _per_dtype_bytes(dtypes: np.ndarray) -> np.ndarray:
    codes, uniques = pd.factorize(np.asarray(dtypes, dtype=object))
    sizes = np.array([bytes_per_element(d) for d in uniques], dtype=float)
    return sizes[codes] if len(codes) else np.zeros(0)


def _weight_bytes(ops: pd.DataFrame) -> np.ndarray:
    """Bytes per weight element: the `/w<dtype>` op suffix (weight-only or mixed
    quantisation, see measurement_ops), else the math dtype."""
    ops_text = ops["op"].to_numpy(dtype=object)
    dtypes = ops["dtype"].to_numpy(dtype=object)
    weight = np.array([_weight_suffix(o) or d for o, d in zip(ops_text, dtypes, strict=True)],
                      dtype=object)
    return _per_dtype_bytes(weight)


def _weight_suffix(op: str) -> str | None:
    for part in str(op).split("/")[1:]:
        if part.startswith("w"):
            return part[1:]
    return None
