"""NcclModel: algorithm formulas, the auto choice, multi-node pricing and bad input."""

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from perfcast.comm import (
    COLLECTIVES,
    CollectiveModel,
    NcclModel,
    RingAlphaBeta,
    algorithm_choice,
    bus_bandwidth_factor,
    default_collective_model,
    shipped_link_fits,
)
from perfcast.errors import InputError
from perfcast.specs import Cluster, Link, get_cluster, get_device

PRESETS = ["dgx-a100", "dgx-h100", "hgx-b200", "gb200-nvl72", "pcie-l40s-x8", "pcie-h100-x8"]
ALGOS = ["ring", "tree", "direct", "hierarchical"]


def _times(model, kind, size, n, cluster):
    size, n = np.broadcast_arrays(np.atleast_1d(np.asarray(size, dtype=float)),
                                  np.atleast_1d(np.asarray(n, dtype=float)))
    return model.collective_times(np.full(len(size), kind, dtype=object), size, n, cluster)


def _plain_cluster(nodes=1):
    """Round numbers and no fitted terms: every formula can be checked by hand."""
    link = Link(kind="nvlink", bandwidth_bps=100e9, latency_s=1e-6, collective_base_s=5e-6,
                bus_efficiency=0.5)
    net = Link(kind="infiniband", bandwidth_bps=10e9, latency_s=4e-6)
    return Cluster(name="plain", device=get_device("h100-sxm"), gpus_per_node=4,
                   num_nodes=nodes, intra_node=link, inter_node=net)


def test_ring_all_reduce_moves_2_n_minus_1_over_n_of_the_buffer():
    box, size = _plain_cluster(), 1e9
    for n in (2, 3, 4):
        t = _times(NcclModel("ring", fits={}), "allreduce", size, n, box)[0]
        assert t == pytest.approx(5e-6 + 2 * (n - 1) * 1e-6 + 2 * (n - 1) / n * size / 50e9)
        # the constant-efficiency ring is RingAlphaBeta's formula
        assert t == pytest.approx(_times(RingAlphaBeta(), "allreduce", size, n, box)[0])


def test_hierarchical_all_reduce_by_hand():
    """8 GPUs on 2 nodes of 4: node reduce-scatter, network all-reduce of 1/4, node
    all-gather; the network gives each GPU its own 10 GB/s adapter."""
    box, size = _plain_cluster(2), 8e8
    node = 5e-6 + 3 * 1e-6 + 0.75 * size / 50e9
    shard = size / 4
    network = min(2 * 4e-6 + shard / 10e9, 2 * 4e-6 + 2 * shard / 10e9)
    t = _times(NcclModel("hierarchical", fits={}), "allreduce", size, 8, box)[0]
    assert t == pytest.approx(2 * node + network)


@given(size=st.floats(64e6, 1e10), n=st.sampled_from([2, 4, 8]),
       preset=st.sampled_from(["dgx-a100", "dgx-h100", "hgx-b200", "pcie-l40s-x8"]))
def test_reduce_scatter_is_about_half_an_all_reduce_under_the_ring(size, n, preset):
    box = get_cluster(preset)
    model = NcclModel("ring")
    rs, ar = (_times(model, k, size, n, box)[0] for k in ("reducescatter", "allreduce"))
    assert ar / 2 <= rs <= 0.6 * ar


@given(size=st.floats(1.0, 1e10), factor=st.floats(1.0, 100.0),
       kind=st.sampled_from(COLLECTIVES), n=st.sampled_from([2, 3, 8, 16, 72, 1024, 16384]),
       preset=st.sampled_from(PRESETS), algorithm=st.sampled_from(["auto", *ALGOS]))
@example(size=1e3, factor=1e3, kind="allreduce", n=16, preset="dgx-h100", algorithm="auto")
def test_time_is_monotone_in_bytes_and_auto_is_the_fastest(size, factor, kind, n, preset,
                                                           algorithm):
    box = get_cluster(preset, n)
    times = NcclModel().algorithm_times(np.array([kind, kind], dtype=object),
                                        np.array([size, size * factor]), np.array([n, n]), box)
    t = times[algorithm]
    finite = np.isfinite(t)
    assert finite.all() or not finite.any()
    if finite.all():
        assert 0 < t[0] <= t[1]
    for name in ALGOS:
        # auto takes what NCCL's tuner chooses among; hierarchical (no NCCL algorithm across
        # a plain network) only on one node, where it is the ring
        if name == "hierarchical" and n > box.gpus_per_node:
            continue
        if name != "direct" or kind in ("alltoall", "sendrecv"):
            assert (times["auto"] <= times[name]).all()


@given(per_gpu=st.floats(1e3, 1e9), nodes=st.integers(1, 64),
       kind=st.sampled_from(["allreduce", "allgather", "reducescatter"]),
       preset=st.sampled_from(["dgx-a100", "dgx-h100", "hgx-b200", "pcie-l40s-x8"]))
def test_more_nodes_never_faster_for_the_same_bytes_per_gpu(per_gpu, nodes, kind, preset):
    """All-reduce: every GPU holds the whole buffer; all-gather / reduce-scatter: the buffer is
    per_gpu x N (each GPU contributes or keeps per_gpu)."""
    box = get_cluster(preset, 8 * (nodes + 1))
    g = box.gpus_per_node
    groups = np.array([g * nodes, g * (nodes + 1)], dtype=float)
    size = np.full(2, per_gpu) if kind == "allreduce" else per_gpu * groups
    t = NcclModel("hierarchical").collective_times(np.array([kind, kind], dtype=object), size,
                                                   groups, box)
    assert t[0] <= t[1]


def test_auto_picks_tree_for_small_multi_node_all_reduce_and_ring_inside_a_node():
    box = get_cluster("dgx-h100", 1024)
    kind = np.array(["allreduce"] * 3, dtype=object)
    picks = algorithm_choice(kind, np.array([1e4, 1e4, 1e9]), np.array([8, 1024, 8]), box)
    assert list(picks) == ["ring", "tree", "nvls"]  # 1 GB on an NVSwitch node: NVLink SHARP
    no_sharp = algorithm_choice(kind, np.array([1e4, 1e4, 1e9]), np.array([8, 1024, 8]),
                                get_cluster("dgx-a100", 1024))
    assert list(no_sharp) == ["ring", "tree", "ring"]
    a2a = algorithm_choice(np.array(["alltoall", "sendrecv"], dtype=object),
                           np.array([1e6, 1e6]), np.array([8, 2]), box)
    assert list(a2a) == ["direct", "direct"]


def test_crossing_nodes_is_bounded_by_the_network_and_nic_sharing_slows_it():
    box = get_cluster("dgx-a100", 16)
    inside, across = _times(NcclModel(), "allreduce", 1e9, [8, 16], box)
    assert across > inside
    shared = box.model_copy(update={"inter_node": box.inter_node.model_copy(
        update={"gpus_per_nic": 8})})
    assert _times(NcclModel(), "allreduce", 1e9, 16, shared)[0] > 4 * across
    # a send/recv between nodes goes through one adapter at the network's rate
    p2p = _times(NcclModel(), "sendrecv", 1e9, 16, box)[0]
    assert p2p == pytest.approx(1e9 / box.inter_node.bandwidth_bps, rel=0.01)


def test_shipped_fits_price_measured_gpus_and_fall_back_to_link_constants():
    fits = shipped_link_fits()
    for gpu in ("a100-sxm4-80gb", "h100-sxm", "h200-sxm", "b200-sxm", "b300-sxm", "gb200",
                "gb300", "l40s", "rtx-pro-6000", "a100-sxm4-40gb"):
        assert gpu in fits and fits[gpu].source
    assert fits["a100-sxm4-40gb"].measured_device == "a100-sxm4-80gb"
    box = get_cluster("pcie-h100-x8")  # no measured PCIe H100: RingAlphaBeta's constants
    for kind in ("allreduce", "allgather", "reducescatter"):
        assert _times(NcclModel(), kind, 1e8, 8, box)[0] == pytest.approx(
            _times(RingAlphaBeta(), kind, 1e8, 8, box)[0])


def test_single_gpu_is_free_and_protocol_holds():
    assert _times(NcclModel(), "allreduce", 1e9, 1, get_cluster("dgx-h100"))[0] == 0
    model = default_collective_model()
    assert isinstance(model, NcclModel) and isinstance(model, CollectiveModel)
    assert model.algorithm == "auto"


@pytest.mark.parametrize("algorithm,kind,n,match", [
    ("tree", "allgather", 8, "tree does not price allgather"),
    ("ring", "alltoall", 8, "ring does not price alltoall"),
    ("direct", "allreduce", 16, "one-shot"),
])
def test_an_algorithm_that_does_not_apply_is_an_input_error(algorithm, kind, n, match):
    with pytest.raises(InputError, match=match):
        _times(NcclModel(algorithm), kind, 1e6, n, get_cluster("dgx-h100", 16))


def test_bad_input_is_named():
    box = get_cluster("dgx-h100")
    with pytest.raises(InputError, match="collective"):
        _times(NcclModel(), "allscatter", 1e6, 8, box)
    with pytest.raises(InputError, match="algorithm"):
        NcclModel("butterfly")
    with pytest.raises(InputError, match="nvls needs NVLink SHARP"):
        _times(NcclModel("nvls"), "allreduce", 1e6, 8, get_cluster("dgx-a100"))
    with pytest.raises(InputError, match="message_bytes"):
        _times(NcclModel(), "allreduce", -1.0, 8, box)


def test_bus_bandwidth_factors_follow_nccl_tests():
    assert bus_bandwidth_factor("allreduce", 8) == pytest.approx(1.75)
    for kind in ("allgather", "reducescatter", "alltoall"):
        assert bus_bandwidth_factor(kind, 8) == pytest.approx(0.875)
    assert bus_bandwidth_factor("broadcast", 8) == bus_bandwidth_factor("sendrecv", 2) == 1.0
    with pytest.raises(InputError):
        bus_bandwidth_factor("gather", 8)


def test_many_rows_price_at_once():
    rng = np.random.default_rng(0)
    n = 20_000
    kind = rng.choice(np.array(COLLECTIVES, dtype=object), n)
    groups = rng.choice([2, 8, 64, 1024, 16384], n)
    groups = np.where(kind == "sendrecv", 2, groups)
    t = NcclModel().collective_times(kind, 10 ** rng.uniform(2, 10, n), groups,
                                     get_cluster("dgx-h100", 16384))
    assert np.isfinite(t).all() and (t > 0).all()
