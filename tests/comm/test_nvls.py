"""NVLink SHARP (NCCL's NVLS all-reduce) on NVSwitch systems: priced from NCCL's algorithm (each
GPU's link carries the buffer once per direction, reduced in the switch), chosen by `auto`
only where it is faster, and refused with the reason where the switch has no SHARP."""

import numpy as np
import pytest

from perfcast.comm import NcclModel, algorithm_choice, bus_bandwidth_factor, nvls_note
from perfcast.errors import InputError
from perfcast.measure import query
from perfcast.specs import get_cluster

AR = np.array(["allreduce"], dtype=object)


def _times(cluster, size, n):
    return {k: float(v[0]) for k, v in NcclModel().algorithm_times(
        AR, np.array([size]), np.array([n]), cluster).items()}


def _pick(cluster, size, n):
    return str(algorithm_choice(AR, np.array([size]), np.array([n]), cluster)[0])


def test_auto_picks_nvls_on_8xh100_where_it_is_faster_and_only_there():
    box = get_cluster("dgx-h100")
    sizes = 2.0 ** np.arange(10, 31)  # 1 KiB - 1 GiB
    picks = algorithm_choice(np.array(["allreduce"] * len(sizes), dtype=object), sizes,
                             np.full(len(sizes), 8), box)
    assert picks[0] != "nvls" and picks[-1] == "nvls"  # fixed 23 us: small sizes stay ring/tree
    for size, pick in zip(sizes, picks, strict=True):
        t = _times(box, size, 8)
        others = min(t["ring"], t["tree"], t["hierarchical"])
        assert (pick == "nvls") == (t["nvls"] < others)
        assert t["auto"] == pytest.approx(min(others, t["nvls"]))


def test_nvls_moves_the_buffer_once_so_its_bus_bandwidth_beats_the_ring_at_1_gib():
    """NCCL/nccl-tests convention: busbw = S/t x 2(n-1)/n; NVLS on 8 H100s at 1 GiB lands near
    the ~480 GB/s nccl-tests reports on DGX H100 (link: 450 GB/s per direction)."""
    box, size = get_cluster("dgx-h100"), 2.0**30
    t = _times(box, size, 8)
    busbw = size / t["nvls"] * bus_bandwidth_factor("allreduce", 8)
    assert 420e9 < busbw < 500e9
    assert t["nvls"] < t["ring"]


def test_nvls_term_matches_the_measured_8_gpu_h100_all_reduces_it_explains():
    """AIConfigurator's NCCL 2.29 fp16 all-reduces on 8 H100s (NCCL's default choice, NVLS
    included) at >= 32 MB: the NVLS term is within 5% of each median, never far below."""
    rows = query("select m, latency_s from kernels where source='aiconfigurator' and "
                 "op='nccl' and family='allreduce' and device='h100-sxm' and n=8 and "
                 "dtype='fp16' and m >= 32e6")
    assert len(rows) >= 4
    box = get_cluster("dgx-h100")
    m = rows["m"].to_numpy()
    nvls = NcclModel().algorithm_times(np.array(["allreduce"] * len(m), dtype=object), m,
                                       np.full(len(m), 8), box)["nvls"]
    ratio = nvls / rows["latency_s"].to_numpy()
    assert np.all(np.abs(ratio - 1) < 0.05), ratio


def test_nvls_on_an_nvl72_domain_covers_all_72_gpus():
    box = get_cluster("gb200-nvl72", 72)
    assert _pick(box, 2.0**30, 72) == "nvls"
    assert np.isfinite(_times(box, 2.0**30, 72)["nvls"])


@pytest.mark.parametrize("preset", ["dgx-a100", "pcie-h100-x8", "mi300x-x8", "pcie-l40s-x8"])
def test_nvls_is_refused_where_the_switch_has_no_sharp(preset):
    box = get_cluster(preset)
    with pytest.raises(InputError) as err:
        NcclModel("nvls").collective_times(AR, np.array([1e9]), np.array([8]), box)
    assert err.value.field == "algorithm"
    assert "NVLink SHARP" in err.value.problem and preset in err.value.problem
    assert "nvls" not in err.value.allowed and "ring" in err.value.allowed
    assert _pick(box, 1e9, 8) != "nvls"


@pytest.mark.parametrize("n", [2, 16])
def test_nvls_needs_three_or_more_gpus_in_one_nvlink_domain(n):
    """NCCL enables NVLS above two GPUs (src/transport/nvls.cc); 16 GPUs span two HGX nodes."""
    box = get_cluster("dgx-h100", 16)
    with pytest.raises(InputError, match="2 GPUs or spans more than one NVLink domain"):
        NcclModel("nvls").collective_times(AR, np.array([1e9]), np.array([n]), box)


def test_nvls_prices_only_all_reduce():
    with pytest.raises(InputError, match="nvls does not price allgather") as err:
        NcclModel("nvls").collective_times(np.array(["allgather"], dtype=object),
                                           np.array([1e9]), np.array([8]),
                                           get_cluster("dgx-h100"))
    assert "nvls" not in err.value.allowed


def test_the_shipped_note_says_what_the_data_show():
    note = nvls_note()
    assert "priced from NCCL's algorithm" in note and "4-GPU" in note
