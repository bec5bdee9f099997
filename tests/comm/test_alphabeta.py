import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfcast.comm import CollectiveModel, CustomAllReduce, RingAlphaBeta, ring_traffic_factor
from perfcast.errors import InputError
from perfcast.specs import get_cluster


def _t(kind, size, n, cluster):
    return RingAlphaBeta().collective_times(np.array([kind]), np.array([size], dtype=float),
                                            np.array([n]), cluster)[0]


def test_ring_allreduce_moves_2_n_minus_1_over_n():
    traffic, steps = ring_traffic_factor("allreduce", np.array([8.0]))
    assert traffic[0] == pytest.approx(2 * 7 / 8) and steps[0] == 14


@given(size=st.floats(1e6, 1e10), n=st.sampled_from([2, 4, 8]))
def test_reduce_scatter_is_half_all_reduce(size, n):
    """Half the traffic and steps; a collective's fixed cost is paid once by either, so the
    ratio tends to 1/2 as the message grows."""
    box = get_cluster("dgx-h100")
    rs, ar = _t("reducescatter", size, n, box), _t("allreduce", size, n, box)
    assert ar / 2 <= rs <= ar
    if size >= 64e6:
        assert rs == pytest.approx(ar / 2, rel=0.05)


def test_crossing_nodes_uses_the_network():
    box = get_cluster("dgx-h100", 16)
    assert _t("allreduce", 1e9, 16, box) > 5 * _t("allreduce", 1e9, 8, box)


def test_single_gpu_costs_nothing_and_unknown_kind_errors():
    box = get_cluster("dgx-a100")
    assert _t("allreduce", 1e9, 1, box) == 0
    with pytest.raises(InputError, match="collective"):
        _t("allscatter", 1e9, 2, box)
    assert isinstance(RingAlphaBeta(), CollectiveModel)


@given(size=st.floats(1.0, 1e10), n=st.sampled_from([2, 4, 8, 16]),
       kind=st.sampled_from(["allreduce", "allgather", "reducescatter", "alltoall"]),
       preset=st.sampled_from(["dgx-h100", "hgx-b200", "pcie-l40s-x8"]))
def test_custom_all_reduce_never_slower_than_the_ring_and_monotone(size, n, kind, preset):
    box = get_cluster(preset, 16) if preset != "pcie-l40s-x8" else get_cluster(preset)
    n = min(n, box.gpus_per_node * box.num_nodes)
    custom, ring = CustomAllReduce(), RingAlphaBeta()
    args = (np.array([kind, kind], dtype=object), np.array([size, 2 * size]),
            np.array([n, n]))
    c, r = custom.collective_times(*args, box), ring.collective_times(*args, box)
    assert (c <= r).all() and c[1] >= c[0]
    if kind != "allreduce" or box.link_for(n).one_shot_base_s is None:
        assert (c == r).all()  # only NVLink all-reduces with measured one-shot terms change
    assert isinstance(custom, CollectiveModel)
