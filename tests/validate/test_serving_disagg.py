"""The disaggregated silicon points: their shipped layouts, the replay's closed-loop
mechanics on a case derivable by hand, and accuracy against the measurements with CI
thresholds (validate/_serving_disagg.py)."""

import json
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from perfcast.kernels import RooflineModel
from perfcast.ops import kv_bytes_per_token
from perfcast.serve import ServeConfig, make_workload, simulate_disaggregated, step_model_for
from perfcast.specs import ParallelPlan
from perfcast.validate import (
    disagg_point,
    load_disagg_points,
    point_precision,
    validate_serving,
)
from perfcast.validate._serving_disagg import pool_layout
from perfcast.validate._serving_sim import ROUNDS, benchmark_lengths, engine_settings

THRESHOLDS = json.loads((Path(__file__).with_name(
    "serving_disagg_accuracy_thresholds.json")).read_text())


def test_shipped_points_carry_both_pools_and_a_consistent_concurrency():
    p = load_disagg_points()
    assert len(p) >= 50 and set(p["device"]) == {"b200-sxm", "h100-sxm"}
    # the client's concurrency fills every decode rank's batch (AIConfigurator's sizing)
    decode_slots = p["decode_batch"] * p["decode_workers"] * p["decode_dp"]
    assert (p["concurrency"] == decode_slots).all()
    assert (p[["prefill_tp", "prefill_dp", "decode_tp", "decode_dp"]] >= 1).all().all()


def _pool(point, pool):
    return ServeConfig(model=point["model"], gpu=point["device"], tp=int(point[f"{pool}_tp"]),
                       max_batch=int(point[f"{pool}_batch"]), max_batch_tokens=9216,
                       scheduler="vllm-v1", host_overlap=True,
                       precision=point_precision(point), max_context=9216,
                       ep=int(point[f"{pool}_ep"]), attention_dp=int(point[f"{pool}_dp"]),
                       replicas=int(point[f"{pool}_workers"] * point[f"{pool}_dp"]))


def test_one_client_waits_for_one_prefill_and_one_kv_transfer():
    """Concurrency 1: TTFT = the prefill pool's step over the whole prompt + the KV's trip
    (latency + bytes / (min(TP) pairs x bandwidth x efficiency)); TPOT = a decode step of
    one sequence at about the mean context."""
    p = load_disagg_points()
    point = p[(p["concurrency"] == 1) & (p["backend"] == "trtllm")].iloc[0]
    ttft, tpot = disagg_point(point)
    isl, osl = int(point["isl"]), int(point["osl"])
    pre, dec = _pool(point, "prefill"), _pool(point, "decode")
    prefill_s = step_model_for(pre, None).step_time_s(prefill_tokens=(isl,),
                                                      prefill_context=(0,))
    link = dec.cluster_spec.intra_node  # both pools fit one 8-GPU node
    kv_bytes = isl * kv_bytes_per_token(pre.model_spec, pre.precision, ParallelPlan())
    transfer_s = link.latency_s + kv_bytes / (min(pre.tp, dec.tp) * link.bandwidth_bps
                                             * link.bus_efficiency)
    assert ttft == pytest.approx(prefill_s + transfer_s, rel=0.01)
    decode_s = step_model_for(dec, None).step_time_s(decode_context=(isl + osl // 2,))
    assert tpot == pytest.approx(decode_s, rel=0.02)


def test_one_step_model_per_deployment_prices_as_each_points_own():
    """The replay shares a pool's step model over every batch limit of its deployment; a
    point priced with step models built for its own limits agrees to 0.1% (the prefill
    grid's sequence axis is interpolated at other points; 2 of the 104 replays move, by
    <= 0.05%)."""
    p = load_disagg_points()
    point = p[p["point_id"] == "dsr1_h100_trtllm_fp8_disagg_1024x1024_c30_cfg494"].iloc[0]
    conc = int(point["concurrency"])
    pools = [pool_layout(point, pool).config(ServeConfig(**engine_settings(point)))
             for pool in ("prefill", "decode")]
    w = make_workload(ROUNDS * conc, arrival="closed_loop", concurrency=conc,
                      max_tokens=None, seed=0, **benchmark_lengths(point))
    own = simulate_disaggregated(*pools, w, prefill_step_model=step_model_for(pools[0]),
                                 decode_step_model=step_model_for(pools[1])).requests
    ttft, tpot = disagg_point(point)
    assert ttft == pytest.approx(own["ttft_s"].mean(), rel=1e-3)
    assert tpot == pytest.approx(own["tpot_s"].mean(), rel=1e-3)


def test_replay_is_deterministic():
    point = load_disagg_points().query("concurrency == 8").iloc[0]
    assert disagg_point(point) == disagg_point(point)


@pytest.fixture(scope="module")
def light_points():
    """Points of concurrency <= 10 (12 of 52, every deployment group: each replays in a
    few seconds)."""
    p = load_disagg_points()
    return p[p["concurrency"] <= THRESHOLDS["max_concurrency"]]


@pytest.fixture(scope="module")
def disagg_rows(light_points):
    perfcast = validate_serving(disagg_point, light_points, method="perfcast")
    roofline = validate_serving(partial(disagg_point, time_model=RooflineModel()),
                                light_points, method="roofline")
    return {m: r[r["split"] == "all"].set_index("group") for m, r in
            (("perfcast", perfcast), ("roofline", roofline))}


@pytest.mark.parametrize("metric", ["ttft", "tpot"])
def test_disaggregated_accuracy_holds(disagg_rows, metric):
    row = disagg_rows["perfcast"].loc[f"all/{metric}"]
    limit = THRESHOLDS["median_ape"][metric]
    assert row["median_ape"] <= limit, (metric, row["median_ape"], limit)
    assert np.isfinite(row["p90_ape"])


def test_perfcast_beats_the_roofline_on_disaggregated_points(disagg_rows):
    """On TPOT, where kernels bind. Both simulations share the engines' host model, whose
    Python-dispatched SGLang prefill steps floor TTFT at these concurrencies (<= 10), so
    TTFT here compares host floors, not kernels: on all 52 points perfcast's TTFT median
    APE is 51.0% against the roofline simulation's 73.4% (README, `validate serving --mode
    disagg`); on these 12, 60.7% against 56.6%."""
    for metric in ("tpot",):
        ours = disagg_rows["perfcast"].loc[f"all/{metric}", "median_ape"]
        base = disagg_rows["roofline"].loc[f"all/{metric}", "median_ape"]
        assert ours < base, (metric, ours, base)
