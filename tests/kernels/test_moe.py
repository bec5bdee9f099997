"""MoE layers priced for physical reasons: routing skew loads the measured EP rank, weights are
read once per active expert, and the fitted `moe` family prices store and op-table rows."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfcast.kernels import PhysicsModel, measurement_ops, roofline_times, shipped_calibration
from perfcast.kernels._moe import DEFAULT_DISTRIBUTION, parse_routing, rank_load
from perfcast.measure import query
from perfcast.ops import COLUMNS
from perfcast.specs import get_device

THRESHOLDS = json.loads((Path(__file__).parent / "moe_thresholds.json").read_text())


def _layer(distribution: str, tokens: int, ep: int, experts: int = 256, topk: int = 8,
           hidden: int = 7168, inter: int = 2048, dtype: str = "fp8") -> pd.DataFrame:
    """One AIConfigurator-style fused MoE layer row (store conventions, see
    scripts/build_measurement_store.py `aic_moe`)."""
    routed = tokens * topk / ep
    active = max(experts / ep * (1 - (1 - topk / experts) ** tokens), 1.0)
    return pd.DataFrame([{
        "layer": "bench", "op": f"moe_torch_flow_cutlass:{distribution}:E{experts}:top{topk}"
                               f":tp1:ep{ep}",
        "family": "moe", "phase": "bench", "b": active, "m": routed / active, "n": 2 * inter,
        "k": hidden, "flops": 2 * routed * 3 * hidden * inter,
        "bytes_read": active * 3 * hidden * inter + tokens * hidden * 4, "bytes_written": 0.0,
        "dtype": dtype, "count": 1}])[COLUMNS]


def test_parse_routing_reads_the_store_label():
    r = parse_routing("moe_torch_flow_nongated:power_law_1.2:E512:top22:tp4:ep16/wfp4")
    assert (r.distribution, r.experts, r.topk, r.tp, r.ep, r.matrices) == (
        "power_law_1.2", 512, 22, 4, 16, 2)
    assert parse_routing("expert_up_proj") is None
    assert DEFAULT_DISTRIBUTION == "balanced"


def test_balanced_routing_spreads_all_routed_tokens():
    routed, active, heaviest, *_ = rank_load(1024, 64, 8, 1, "balanced")
    assert routed == 1024 * 8 and active == 64 and heaviest == 128


@pytest.mark.parametrize("ep", [8, 32])
def test_skew_loads_the_hottest_rank(ep):
    """The measured rank is the most loaded one: more skew, more routed tokens on it."""
    loads = [rank_load(4096, 256, 8, ep, d)[0] for d in
             ("balanced", "power_law_1.01", "power_law_1.2")]
    assert loads[0] == pytest.approx(4096 * 8 / ep, rel=0.01)
    assert loads[0] < loads[1] < loads[2]


def test_skew_reads_fewer_expert_weights_in_decode():
    """Few tokens under skewed routing land on fewer experts: fewer weight bytes."""
    active = [rank_load(8, 256, 8, 1, d)[1] for d in ("balanced", "power_law_1.2")]
    assert active[1] < active[0]


@pytest.mark.parametrize("device", ["h100-sxm", "rtx-pro-6000"])
def test_more_skew_slows_an_expert_parallel_layer(device):
    """Equal tokens, EP 8: the layer waits on its most loaded rank (AIConfigurator H100
    medians rise the same way: balanced < power_law_1.01 < power_law_1.2)."""
    model, dev = PhysicsModel(shipped_calibration()), get_device(device)
    times = [model.kernel_times(_layer(d, 4096, 8), dev)[0]
             for d in ("balanced", "power_law_1.01", "power_law_1.2")]
    assert times[0] < times[1] < times[2]


def test_rows_without_routing_config_are_priced_as_balanced():
    """A `moe` row as an op table would carry it (b experts of m tokens, no config) is priced
    by the moe family, never below the roofline."""
    dev = get_device("h100-sxm")
    row = _layer("balanced", 512, 1).assign(op="expert_up_proj", n=4096.0)
    t = PhysicsModel(shipped_calibration()).kernel_times(row, dev)
    assert np.isfinite(t).all() and t[0] >= roofline_times(row, dev, waves=False)[0]


def test_moe_family_is_calibrated_and_beats_the_roofline_on_its_devices():
    cal = shipped_calibration()
    assert "moe" in cal.families
    rows = query("select * from kernels where family = 'moe' and device = 'h200-sxm' "
                 "order by op, batch, n, k, dtype, weight_dtype limit 100000")
    rows = rows.iloc[:: max(len(rows) // THRESHOLDS["rows"], 1)]
    ops, dev = measurement_ops(rows), get_device("h200-sxm")
    meas = rows["latency_s"].to_numpy()
    pred = PhysicsModel(cal).kernel_times(ops, dev, rows["timing"].to_numpy(dtype=object))
    mape = float(np.mean(np.abs(pred - meas) / meas))
    roof = float(np.mean(np.abs(roofline_times(ops, dev, waves=False) - meas) / meas))
    assert mape < roof
    assert mape <= THRESHOLDS["max_target_measured_mape_h200"], mape


def test_expert_load_gives_the_hottest_rank_skew():
    """The multiplier a serving plan's heaviest-rank rows need, from a named distribution."""
    from perfcast.errors import InputError
    from perfcast.kernels import expert_load

    assert expert_load(4096, 256, 8, 8).skew == pytest.approx(1.0, rel=0.01)
    mild, strong = (expert_load(4096, 256, 8, 8, f"power_law_{a}") for a in ("1.01", "1.2"))
    assert 1.0 < mild.skew < strong.skew
    with pytest.raises(InputError):
        expert_load(16, 256, 8, 3)


def _one_draw_at_a_time(tokens, experts, topk, ep, distribution):
    """rank_load as first written (one power-law draw per call, aiconfigurator's loop): the
    definition the vectorised draws must reproduce bit for bit."""
    import zlib

    from perfcast.kernels._moe import DRAWS, TILE_ROWS

    def draw(rng, alpha):
        lo, hi = (1.0, tokens * 0.8) if tokens * topk > experts else (0.01, 2.0)
        u = rng.random(experts)
        hi = max(hi, lo * 1.0001)
        x = ((hi ** (1 - alpha) - lo ** (1 - alpha)) * u + lo ** (1 - alpha)) ** (1 / (1 - alpha))
        loads = np.rint(x / x.sum() * tokens * topk).astype(np.int64)
        delta = tokens * topk - int(loads.sum())
        order = np.argsort(-(loads + 0.5 * rng.random(experts)), kind="stable")
        if delta > 0:
            q, r = divmod(delta, experts)
            loads += q
            loads[order[:r]] += 1
        elif delta < 0:
            positive = order[loads[order] > 0][::-1]
            loads[positive[:-delta]] -= 1
        return loads

    local = max(experts // max(ep, 1), 1)
    alpha = float(distribution.removeprefix("power_law_"))
    rng = np.random.default_rng(zlib.crc32(f"{tokens}:{experts}:{topk}:{ep}:{alpha}".encode()))
    ranks = [draw(rng, alpha)[: local * (experts // local)].reshape(-1, local)
             for _ in range(DRAWS)]
    mine = [r[np.argmax(r.sum(axis=1))] for r in ranks]
    stats = [(m.sum(), (m > 0).sum(), m.max(), np.ceil(m / TILE_ROWS[0]).sum(),
              np.ceil(m / TILE_ROWS[1]).sum()) for m in mine]
    return tuple(float(v) for v in np.mean(stats, axis=0))


@pytest.mark.parametrize("distribution", ["power_law_1.01", "power_law_1.2"])
def test_vectorised_draws_are_the_one_at_a_time_draws(distribution):
    """Every draw of one configuration comes from one generator call and is rounded and
    topped up row by row: the expected loads are exactly the per-draw loop's, including
    top-ups up and down and tokens·topk below the expert count."""
    for tokens in (1, 2, 3, 7, 31, 32, 33, 100, 257, 1000, 4097, 16384):
        for experts, topk, ep in ((8, 2, 1), (64, 6, 8), (128, 8, 4), (256, 8, 8),
                                  (384, 8, 16), (160, 6, 32)):
            want = _one_draw_at_a_time(tokens, experts, topk, ep, distribution)
            assert rank_load(tokens, experts, topk, ep, distribution) == want, (
                tokens, experts, topk, ep)
