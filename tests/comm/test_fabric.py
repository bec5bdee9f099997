"""The network's fabric on the cluster spec (per-flow rate, leaf-spine taper, rails, SHARP) and
how NcclModel prices it: defaults change nothing, one node never sees the fabric, a taper
never speeds a collective up, SHARP only touches multi-node all-reduce."""

import json
from importlib import resources

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from perfcast.comm import COLLECTIVES, NcclModel, algorithm_choice
from perfcast.comm._levels import DUPLEX_FLOW
from perfcast.errors import InputError
from perfcast.specs import Link, cluster_names, get_cluster
from perfcast.specs._cluster import FABRIC_DEFAULTS, with_fabric

PRESETS = ["dgx-a100", "dgx-h100", "hgx-b200", "gb200-nvl72", "pcie-l40s-x8"]
SIZES = np.array([1e3, 6e4, 1e6, 3e7, 1e9])


def _all_times(cluster, n, sizes=SIZES, algorithm="auto"):
    """Seconds of every collective x size for a group of n GPUs: array (kinds, sizes)."""
    kinds = np.repeat(np.array(COLLECTIVES, dtype=object), len(sizes))
    size = np.tile(sizes, len(COLLECTIVES))
    t = NcclModel(algorithm).algorithm_times(kinds, size, np.full(len(size), float(n)),
                                             cluster)
    return {name: v.reshape(len(COLLECTIVES), len(sizes)) for name, v in t.items()}


fabrics = st.fixed_dictionaries({
    "flow_bandwidth_bps": st.one_of(st.none(), st.floats(1e9, 2.5e10)),
    "oversubscription": st.floats(1.0, 8.0),
    "nodes_per_leaf": st.integers(1, 64),
    "sharp": st.booleans(),
})


def test_every_preset_loads_from_json_without_fabric_keys_and_defaults_change_nothing():
    doc = json.loads((resources.files("perfcast.specs") / "data" / "clusters.json").read_text())
    for entry in doc["clusters"]:
        assert not set(FABRIC_DEFAULTS) & set(entry["intra_node"])  # old JSON: no fabric keys
    for name in cluster_names():
        if get_cluster(name).inter_node is None:
            continue
        box = get_cluster(name, 1024)
        explicit = with_fabric(box, **FABRIC_DEFAULTS)
        assert not explicit.inter_node.describes_fabric()
        for n in (2, box.gpus_per_node, 2 * box.gpus_per_node, 1024):
            before, after = _all_times(box, n), _all_times(explicit, n)
            for name_ in before:
                np.testing.assert_array_equal(before[name_], after[name_])


@settings(max_examples=40, deadline=None)
@given(fabric=fabrics, preset=st.sampled_from(PRESETS))
def test_a_one_node_group_never_sees_the_fabric(fabric, preset):
    box = get_cluster(preset, 256)
    if fabric["flow_bandwidth_bps"] is not None:
        fabric["flow_bandwidth_bps"] = min(fabric["flow_bandwidth_bps"],
                                           box.inter_node.bandwidth_bps)
    described = with_fabric(box, **{**fabric, "sharp": fabric["sharp"]
                                    and box.inter_node.kind.value == "infiniband"})
    for n in (2, box.gpus_per_node):
        plain, other = _all_times(box, n), _all_times(described, n)
        for name in plain:
            np.testing.assert_array_equal(plain[name], other[name])


@settings(max_examples=60, deadline=None)
@given(fabric=fabrics, preset=st.sampled_from(["dgx-a100", "dgx-h100", "hgx-b200"]),
       nodes=st.integers(2, 128), kind=st.sampled_from(COLLECTIVES),
       size=st.floats(1.0, 1e10), factor=st.floats(1.0, 100.0))
def test_time_never_falls_as_bytes_grow_under_any_fabric(fabric, preset, nodes, kind, size,
                                                         factor):
    box = with_fabric(get_cluster(preset, 8 * nodes), **fabric)
    n = 2 if kind == "sendrecv" else 8 * nodes
    t = NcclModel().collective_times(np.array([kind, kind], dtype=object),
                                     np.array([size, size * factor]), np.array([n, n]), box)
    assert 0 < t[0] <= t[1]


@settings(max_examples=60, deadline=None)
@given(taper=st.floats(1.0, 16.0), per_leaf=st.integers(1, 64), nodes=st.integers(2, 256),
       preset=st.sampled_from(["dgx-a100", "dgx-h100", "hgx-b200"]),
       flow=st.one_of(st.none(), st.floats(1e9, 2.5e10)))
def test_oversubscription_never_makes_a_collective_faster(taper, per_leaf, nodes, preset, flow):
    base = with_fabric(get_cluster(preset, 8 * nodes), flow_bandwidth_bps=flow,
                       nodes_per_leaf=per_leaf)
    tapered = with_fabric(base, oversubscription=taper)
    for n in (16, 8 * nodes):
        full, cut = _all_times(base, n), _all_times(tapered, n)
        assert (cut["auto"] >= full["auto"]).all()
        if 8 * nodes <= 8 * per_leaf:  # inside one leaf the spine is never crossed
            np.testing.assert_array_equal(cut["auto"], full["auto"])


def test_a_group_wider_than_a_leaf_gets_the_adapters_rate_over_the_taper():
    """8 DGX A100 nodes (8 x 25 GB/s adapters each): inside a leaf of 8 the ring runs as on a
    non-blocking tier; over leaves of 4 a 2:1 spine halves the node's network rate."""
    box, size = get_cluster("dgx-a100", 64), 1e10

    def ring_s(cluster):
        return NcclModel("ring").collective_times(np.array(["allreduce"], dtype=object),
                                                  np.array([size]), np.array([64.0]),
                                                  cluster)[0]
    full = ring_s(box)
    assert ring_s(with_fabric(box, nodes_per_leaf=8, oversubscription=2.0)) == full
    cut = ring_s(with_fabric(box, nodes_per_leaf=4, oversubscription=2.0))
    busbw = 2 * 63 / 64 * size / cut
    assert busbw == pytest.approx(8 * 25e9 / 2, rel=0.01)
    assert cut > 1.5 * full


def test_per_flow_limit_grows_with_gpus_per_node_until_the_adapters_cap_it():
    """The measured send/recv rate caps each GPU's stream (x DUPLEX_FLOW in a collective); one
    shared 25 GB/s adapter caps the node: 1, 2, 4 GPUs a node gain, 8 do not."""
    box = get_cluster("dgx-a100", 16)
    flow = 7.5e9
    shared = with_fabric(box, flow_bandwidth_bps=flow).model_copy(
        update={"inter_node": box.inter_node.model_copy(
            update={"flow_bandwidth_bps": flow, "gpus_per_nic": 8})})
    size, rates = 1e10, []
    for per in (1, 2, 4, 8):
        two = shared.model_copy(update={"gpus_per_node": per, "num_nodes": 2})
        t = NcclModel("ring").collective_times(np.array(["allreduce"], dtype=object),
                                               np.array([size]), np.array([2.0 * per]), two)[0]
        rates.append(2 * (2 * per - 1) / (2 * per) * size / t)  # bus bandwidth = node's rate
    expect = [min(per * flow * DUPLEX_FLOW, 25e9) for per in (1, 2, 4, 8)]
    assert rates == pytest.approx(expect, rel=0.01)
    # send/recv between nodes: the flow, one way, no duplex discount
    p2p = NcclModel().collective_times(np.array(["sendrecv"], dtype=object), np.array([size]),
                                       np.array([16.0]), with_fabric(box, flow_bandwidth_bps=flow))
    assert size / p2p[0] == pytest.approx(flow, rel=0.01)


def _ring_slope(cluster, n, sizes):
    """Seconds per byte of bus traffic between two all-reduce sizes (latency cancels)."""
    t = NcclModel("ring").collective_times(np.array(["allreduce"] * 2, dtype=object),
                                           np.asarray(sizes, dtype=float),
                                           np.array([float(n)] * 2), cluster)
    return (t[1] - t[0]) / (2 * (n - 1) / n * (sizes[1] - sizes[0]))


def test_a_measured_flow_runs_one_stream_until_chunks_cover_its_bandwidth_delay_product():
    """Two DGX A100 nodes, 8 GPUs each, network described by a 7.5 GB/s flow: while each GPU's
    step chunk (S/16) is under the flow's bandwidth-delay product the node drives one stream
    (the flow x DUPLEX_FLOW); once chunks cover 8 products all 8 streams run, capped by the
    adapters. The spec network (no flow) runs 8 streams at every size."""
    box = get_cluster("dgx-a100", 16)
    flow = with_fabric(box, flow_bandwidth_bps=7.5e9)
    small = [16 * 2e3, 16 * 4e3]  # chunks of 2-4 kB: far under 7.5 GB/s x ~20 us
    assert 1 / _ring_slope(flow, 16, small) == pytest.approx(7.5e9 * DUPLEX_FLOW, rel=0.02)
    large = [16 * 4e7, 16 * 8e7]
    assert 1 / _ring_slope(flow, 16, large) == pytest.approx(
        min(8 * 7.5e9 * DUPLEX_FLOW, 8 * 25e9), rel=0.02)
    spec_small = 1 / _ring_slope(box, 16, small)
    assert spec_small > 4 * 7.5e9 * DUPLEX_FLOW  # no ramp without a measured flow


def test_between_one_and_g_streams_a_ring_all_reduce_takes_the_same_time():
    """Each doubling of the chunk doubles the streams while 1 < chunk / bdp < g, so the
    network's time stays put (flows x flow rate grows as fast as the bytes)."""
    flow = with_fabric(get_cluster("dgx-a100", 16), flow_bandwidth_bps=7.5e9)
    t = NcclModel("ring").collective_times(np.array(["allreduce"] * 2, dtype=object),
                                           np.array([16 * 4e5, 16 * 8e5]),
                                           np.array([16.0, 16.0]), flow)
    assert t[1] == pytest.approx(t[0], rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(nodes=st.integers(1, 64), preset=st.sampled_from(["dgx-a100", "dgx-h100", "hgx-b200"]),
       flow=st.one_of(st.none(), st.floats(1e9, 2.5e10)))
def test_sharp_only_changes_multi_node_all_reduce_and_never_slows_it(nodes, preset, flow):
    box = with_fabric(get_cluster(preset, 8 * nodes), flow_bandwidth_bps=flow)
    sharp = with_fabric(box, sharp=True)
    n = 8 * nodes
    plain, fast = _all_times(box, n), _all_times(sharp, n)
    ar = COLLECTIVES.index("allreduce")
    for i, _ in enumerate(COLLECTIVES):
        if i == ar and nodes > 1:
            assert (fast["auto"][i] <= plain["auto"][i]).all()
            assert np.isfinite(fast["collnet"][i]).all()
        else:
            np.testing.assert_array_equal(fast["auto"][i], plain["auto"][i])
            assert not np.isfinite(fast["collnet"][i]).any()


def test_sharp_latency_is_one_network_hop_whatever_the_node_count():
    """CollNet pays the network latency once (tuning.cc), so at small sizes it wins across
    many nodes, where a ring pays 2(k-1) hops and a tree 2 log2 k."""
    box = with_fabric(get_cluster("dgx-h100", 8192), sharp=True)
    kinds = np.array(["allreduce"] * 2, dtype=object)
    t = NcclModel("collnet").collective_times(kinds, np.array([1e4, 1e4]),
                                              np.array([16.0, 8192.0]), box)
    assert t[1] == pytest.approx(t[0])
    assert algorithm_choice(kinds, np.array([1e4, 1e4]), np.array([16.0, 8192.0]),
                            box)[1] == "collnet"


def test_collnet_named_without_sharp_or_on_one_node_is_refused():
    box = get_cluster("dgx-h100", 16)
    with pytest.raises(InputError, match="no SHARP"):
        NcclModel("collnet").collective_times(np.array(["allreduce"], dtype=object),
                                              np.array([1e6]), np.array([16.0]), box)
    with pytest.raises(InputError, match="one node"):
        NcclModel("collnet").collective_times(np.array(["allreduce"], dtype=object),
                                              np.array([1e6]), np.array([8.0]),
                                              with_fabric(box, sharp=True))


@pytest.mark.parametrize(("fabric", "field"), [
    ({"oversubscription": 2.0}, "inter_node.nodes_per_leaf"),
    ({"oversubscription": 0.5, "nodes_per_leaf": 4}, "inter_node.oversubscription"),
    ({"nodes_per_leaf": 0}, "inter_node.nodes_per_leaf"),
    ({"flow_bandwidth_bps": 1e12}, "inter_node.flow_bandwidth_bps"),
    ({"flow_bandwidth_bps": -1.0}, "inter_node.flow_bandwidth_bps"),
    ({"sharp": True, "rail_optimized": False}, "inter_node.sharp"),
    ({"rail": True}, "inter_node.rail"),
])
def test_bad_fabric_is_an_input_error_naming_the_field(fabric, field):
    with pytest.raises(InputError) as err:
        with_fabric(get_cluster("dgx-h100", 16), **fabric)
    assert err.value.field == field


def test_fabric_fields_belong_to_the_network_link():
    with pytest.raises(InputError) as err:
        with_fabric(get_cluster("pcie-a100-40gb-x4"), sharp=True)  # no network at all
    assert err.value.field == "inter_node.sharp"
    with pytest.raises(InputError, match="infiniband") as err:
        with_fabric(get_cluster("mi355x-x8", 16), sharp=True)  # RoCE: no InfiniBand SHARP
    assert err.value.field == "inter_node.sharp"
    box = get_cluster("dgx-h100", 16)
    with pytest.raises(ValidationError, match="set them on inter_node"):
        box.model_validate({**box.model_dump(), "intra_node": {
            **box.intra_node.model_dump(), "oversubscription": 2.0, "nodes_per_leaf": 2}})
    with pytest.raises(ValidationError, match="sharp"):
        Link(kind="ethernet", bandwidth_bps=1e10, latency_s=1e-6, sharp=True)


def test_collective_request_takes_the_fabric_and_names_a_refused_option():
    from perfcast.api import CollectiveRequest, run

    def ask(**options):
        return run(CollectiveRequest.from_options(
            {"op": "allreduce", "num_gpus": 1024, "bytes": "64KiB", "cluster": "dgx-h100",
             **options}))
    plain, sharp = ask(), ask(sharp=True)
    assert sharp.algorithm == "collnet" and sharp.time_s < plain.time_s
    tapered = ask(bytes="1GiB", oversubscription=2.0, nodes_per_leaf=32)
    assert tapered.time_s > ask(bytes="1GiB").time_s
    for options, field in (({"oversubscription": 2.0}, "nodes_per_leaf"),
                           ({"sharp": True, "cluster": "mi355x-x8", "num_gpus": 16}, "sharp")):
        with pytest.raises(InputError) as err:
            ask(**options)
        assert err.value.field == field
