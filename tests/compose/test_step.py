import numpy as np
import pytest

from perfcast.comm import RingAlphaBeta
from perfcast.compose import Execution, host_overhead_s, step_time
from perfcast.errors import InputError
from perfcast.ops import Batch, step_ops
from perfcast.specs import ParallelPlan, get_cluster


def test_breakdown_sums_to_step_time(llama7b, a100_box):
    ops = step_ops(llama7b, Batch.decode(4, 700))
    f = step_time(ops, a100_box, "eager", host_s=1e-3)
    assert f.by("family")["total_s"].sum() == pytest.approx(f.time_s)
    assert f.by("layer")["total_s"].sum() == pytest.approx(f.time_s)
    assert f.time_s == pytest.approx(f.kernel_s + f.comm_s + f.launch_s + f.host_s)


class _Constant:
    def __init__(self, seconds):
        self.seconds = seconds

    def kernel_times(self, ops, device):
        return np.full(len(ops), self.seconds)


@pytest.mark.parametrize("kernel_s", [1e-6, 1e-3])
def test_eager_is_the_slower_of_host_and_gpu(llama7b, a100_box, kernel_s):
    ops = step_ops(llama7b, Batch.decode(1, 100))
    launches = int(ops["count"].sum())
    eager = step_time(ops, a100_box, Execution.EAGER, time_model=_Constant(kernel_s),
                      dispatch_s=10e-6)
    graph = step_time(ops, a100_box, Execution.CUDA_GRAPH, time_model=_Constant(kernel_s))
    assert graph.launch_s == 0
    if kernel_s < 10e-6:  # host-bound: the GPU waits for every dispatch
        assert eager.time_s == pytest.approx(launches * 10e-6 + kernel_s)
    else:  # GPU-bound: only the first dispatch is exposed
        assert eager.time_s == pytest.approx(graph.time_s + 10e-6)


def test_eager_on_a_cpu_is_serial(llama7b):
    from perfcast.specs import cluster_for

    cpu = cluster_for(_cpu(), 1)
    ops = step_ops(llama7b, Batch.decode(1, 100))
    f = step_time(ops, cpu, "eager", time_model=_Constant(1e-3), dispatch_s=5e-6)
    assert f.time_s == pytest.approx(ops["count"].sum() * (1e-3 + 5e-6))


def _cpu():
    from perfcast.specs import Device

    return Device(name="test-cpu", kind="cpu", vendor="test", arch="x86", sm_count=1,
                  dense_peak_flops={"fp32": 1e11}, hbm_capacity_bytes=64e9,
                  hbm_bandwidth_bps=20e9)


def test_tp_allreduce_priced_by_comm_model(llama7b):
    box = get_cluster("dgx-a100", 4)
    ops = step_ops(llama7b, Batch.prefill(1, 1024), plan=ParallelPlan(tp=4))
    f = step_time(ops, box, comm_model=RingAlphaBeta())
    msg = 1024 * 4096 * 2
    link = box.intra_node
    per = link.collective_base_s + 6 * link.latency_s + 1.5 * msg / (
        link.bandwidth_bps * link.bus_efficiency)
    assert f.comm_s == pytest.approx((2 * 32 + 1) * per)


def test_bad_execution_mode(llama7b, a100_box):
    with pytest.raises(InputError, match="execution"):
        step_time(step_ops(llama7b, Batch.decode(1, 10)), a100_box, "graphs")


def test_host_overhead_profiles():
    assert host_overhead_s("none", 8, 1) == 0
    one, many = host_overhead_s("vllm-v0", 1, 1), host_overhead_s("vllm-v0", 64, 1)
    assert 0.5e-3 < one < many < 5e-3
    assert host_overhead_s("vllm-v0", 8, 2) > host_overhead_s("vllm-v0", 8, 1)
    with pytest.raises(InputError):
        host_overhead_s("trt", 1, 1)


def test_time_model_protocol_double(llama7b, a100_box):
    ops = step_ops(llama7b, Batch.decode(1, 10))
    f = step_time(ops, a100_box, time_model=_Constant(1e-3))
    assert f.kernel_s == pytest.approx(1e-3 * ops["count"].sum())
