import itertools
import json
import math

import pytest

from perfcast.errors import InputError
from perfcast.sweep import (
    Slo,
    bisect_max,
    capacity_search,
    gpu_prices,
    parse_prices,
    qps_ladder,
    search_candidate,
)

# Test double for `perfcast serve`: a replica of (gpu, tp) keeps P99 TPOT at 40 ms up to its
# capacity and breaks the 50 ms SLO above it; TTFT grows with load.
CAPACITY = {("fast", 4): 12.0, ("fast", 8): 30.0, ("slow", 4): 2.2, ("slow", 8): 4.1}
SLO = Slo(ttft_p99_s=1.0, tpot_p99_s=0.05)
PRICES = {"fast": {"usd_per_gpu_hour": 10.0}, "slow": {"usd_per_gpu_hour": 3.0}}


def fake_serve(point):
    key = (point["gpu"], point["tp"])
    if key not in CAPACITY:
        raise InputError("gpu_memory_utilization", f"{point['gpu']} TP{point['tp']} does not fit")
    load = point["qps"] / CAPACITY[key]
    return {"ttft_s": {"p99": 0.1 + 0.5 * load}, "tpot_s": {"p99": 0.04 if load <= 1 else 0.06},
            "throughput_req_s": point["qps"], "throughput_tok_s": point["qps"] * 128}


def test_ladder_is_geometric_and_ends_at_the_target():
    ladder = qps_ladder(10.0, step=0.05)
    assert ladder[-1] == 10.0 and ladder == sorted(ladder)
    assert ladder[0] <= 10.0 / 16 < ladder[1] and len(ladder) == 58
    ratios = [b / a for a, b in itertools.pairwise(ladder)]
    assert all(r == pytest.approx(1.05, rel=1e-5) for r in ratios)


@pytest.mark.parametrize("count", [1, 2, 7, 64, 87])
def test_bisection_finds_every_threshold_exactly_in_log_probes(count):
    for threshold in range(-1, count):
        probed = []

        def passes(i, threshold=threshold, probed=probed):
            probed.append(i)
            return i <= threshold

        assert bisect_max(passes, count) == (threshold, len(probed))
        assert len(probed) <= math.ceil(math.log2(count + 1))


def test_search_finds_the_largest_rung_under_the_capacity():
    ladder = qps_ladder(10.0)
    row = search_candidate(fake_serve, {}, SLO, ladder, ("slow", 8))
    assert row["max_qps_per_replica"] == max(q for q in ladder if q <= 4.1)
    assert row["replicas"] == math.ceil(10.0 / row["max_qps_per_replica"]) == 3
    assert row["qps_per_replica"] == pytest.approx(10 / 3, rel=1e-5)
    assert row["tpot_p99_s"] == 0.04 and row["output_tokens_per_request"] == 128
    fast = search_candidate(fake_serve, {}, SLO, ladder, ("fast", 4))
    assert fast["replicas"] == 1 and fast["max_qps_capped"] and fast["probes"] == 1


def test_candidates_that_fail_are_reported_not_raised():
    ladder = qps_ladder(10.0)
    row = search_candidate(fake_serve, {}, SLO, ladder, ("slow", 2))
    assert row["status"] == "error" and "does not fit" in row["reason"]
    tight = search_candidate(fake_serve, {}, Slo(0.05, 0.05), ladder, ("fast", 8))
    assert tight["status"] == "slo-unmet"


def test_the_chosen_configuration_is_the_cheapest_feasible_one():
    candidates = [(g, t) for g in ("fast", "slow") for t in (2, 4, 8)]
    result = capacity_search(fake_serve, {}, candidates, 10.0, SLO, PRICES, workers=1)
    ok = [r for r in result["candidates"] if r["status"] == "ok"]
    assert len(ok) == 4
    ladder = qps_ladder(10.0)
    for row in ok:  # brute force over the ladder: replicas and cost of each candidate
        best = max(q for q in ladder if q <= CAPACITY[(row["gpu"], row["tp"])])
        assert row["replicas"] == math.ceil(10.0 / best)
        assert row["usd_per_hour"] == row["replicas"] * row["tp"] * PRICES[row["gpu"]][
            "usd_per_gpu_hour"]
    costs = {(r["gpu"], r["tp"]): r["usd_per_hour"] for r in ok}
    assert costs == {("fast", 4): 40.0, ("fast", 8): 80.0, ("slow", 4): 60.0, ("slow", 8): 72.0}
    cheapest = min(ok, key=lambda r: r["usd_per_hour"])
    assert result["chosen"] == cheapest
    assert (cheapest["gpu"], cheapest["tp"], cheapest["replicas"]) == ("fast", 4, 1)
    tokens_per_hour = 10.0 * 128 * 3600
    assert cheapest["usd_per_million_output_tokens"] == pytest.approx(40.0 / (
        tokens_per_hour / 1e6))


def test_the_pareto_rows_are_the_non_dominated_feasible_candidates():
    candidates = [("fast", 4), ("slow", 8)]
    out = capacity_search(fake_serve, {}, candidates, 7.0, SLO, PRICES, workers=1)
    rows = out["candidates"]
    for metric, column in (("ttft", "ttft_p99_s"), ("tpot", "tpot_p99_s")):
        front = out["pareto"][metric]
        ok = [i for i, r in enumerate(rows) if r["status"] == "ok"]
        assert set(front) <= set(ok)
        for i in ok:
            beaten = any(rows[j]["usd_per_hour"] <= rows[i]["usd_per_hour"]
                         and rows[j][column] <= rows[i][column] and rows[j] != rows[i]
                         for j in ok)
            assert (i in front) != beaten


def test_the_search_is_deterministic():
    candidates = [("fast", 4), ("slow", 8)]
    runs = [capacity_search(fake_serve, {}, candidates, 7.0, SLO, PRICES, workers=1)
            for _ in range(2)]
    assert json.dumps(runs[0]) == json.dumps(runs[1])


def test_shipped_prices_are_sourced_list_prices():
    prices = gpu_prices()
    assert {"h100-sxm", "a100-sxm4-80gb"} <= set(prices)
    for entry in prices.values():
        assert entry["usd_per_gpu_hour"] > 0
        assert "list price" in entry["source"] and entry["as_of"][:2] == "20"


def test_a_price_file_overrides_entries(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"prices": {"H100-SXM5-80GB": {"usd_per_gpu_hour": 2.5}}}))
    prices = gpu_prices(path)
    assert prices["h100-sxm"]["usd_per_gpu_hour"] == 2.5  # alias resolved
    assert prices["a100-sxm4-80gb"] == gpu_prices()["a100-sxm4-80gb"]


@pytest.mark.parametrize("data,field,hint", [
    ({"h100-sxmm": {"usd_per_gpu_hour": 2}}, "prices.h100-sxmm", "h100-sxm"),
    ({"h100-sxm": {"usd_per_gpu_hour": -1}}, "prices.h100-sxm.usd_per_gpu_hour", "> 0"),
    ({"h100-sxm": {"usd_per_gpu_hour": "2"}}, "prices.h100-sxm.usd_per_gpu_hour", "> 0"),
    ({"h100-sxm": 2.0}, "prices.h100-sxm", "usd_per_gpu_hour"),
    ({"h100-sxm": {"usd_per_gpu_hour": 2, "currency": "EUR"}},
     "prices.h100-sxm.currency", "as_of"),
    ([1, 2], "prices", "usd_per_gpu_hour"),
])
def test_price_errors_name_the_field(data, field, hint):
    with pytest.raises(InputError) as err:
        parse_prices(data)
    assert err.value.field == field and hint in str(err.value)


def test_price_file_that_is_not_json_or_missing(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for path in (bad, tmp_path / "missing.json"):
        with pytest.raises(InputError, match="^prices"):
            gpu_prices(path)


def test_a_candidate_without_a_price_is_refused():
    with pytest.raises(InputError, match="no price for other"):
        capacity_search(fake_serve, {}, [("other", 4)], 10.0, SLO, PRICES, workers=1)
