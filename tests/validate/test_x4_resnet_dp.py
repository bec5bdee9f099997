"""Scenario X4: ResNet-50 data-parallel training on 2/4/8 A100 — iteration time and the share
of it that gradient all-reduce leaves exposed. The shared data holds no measured DDP ResNet-50
run, so this checks the forecast's shape (monotone in GPU count, a plausible range), not its
accuracy."""

import pandas as pd
import pytest

from perfcast.compose import data_parallel_step, step_time
from perfcast.kernels import PhysicsModel, shipped_calibration
from perfcast.ops import cnn_ops
from perfcast.specs import Precision, get_cluster

BATCH_PER_GPU = 64  # weak scaling: each GPU keeps its batch
GPUS = (2, 4, 8)


def _training_table(forward: pd.DataFrame) -> pd.DataFrame:
    """Forward + backward: each conv/linear's backward is a data-gradient and a weight-gradient
    GEMM as costly as its forward (the rule ops.training_ops applies to GEMMs); every other
    kernel runs once more backward. BN's batch statistics and the optimizer are left out."""
    matmul = forward["family"].isin(["conv", "gemm"])
    backward = pd.concat([forward[matmul], forward[matmul], forward[~matmul]])
    return pd.concat([forward, backward.assign(phase="backward")], ignore_index=True)


@pytest.fixture(scope="module")
def iterations():
    forward = cnn_ops("resnet50", BATCH_PER_GPU, precision=Precision.uniform("fp32"))
    ops = _training_table(forward)
    weights = float((forward["n"] * forward["k"] * forward["count"])[
        forward["family"].isin(["conv", "gemm"])].sum())
    grad_bytes = 4 * weights  # fp32 gradients, all-reduced by DDP in 25 MB buckets
    model = PhysicsModel(shipped_calibration())
    out = {}
    for n in (1, *GPUS):
        cluster = get_cluster("dgx-a100", n)
        step = step_time(ops, cluster, "eager", time_model=model)
        out[n] = data_parallel_step(step, grad_bytes, cluster, n)
    return weights, out


def test_resnet50_has_its_published_weight_count(iterations):
    weights, _ = iterations
    assert weights == pytest.approx(25.5e6, rel=0.01)  # torchvision: 25.56M incl. BN and bias


def test_comm_share_grows_with_gpu_count(iterations):
    _, it = iterations
    shares = [it[n].exposed_comm_s / it[n].time_s for n in GPUS]
    assert it[1].exposed_comm_s == 0.0
    assert all(a < b for a, b in zip(shares, shares[1:], strict=False))
    assert [it[n].comm_s for n in GPUS] == sorted(it[n].comm_s for n in GPUS)


def test_comm_share_and_iteration_time_are_plausible(iterations):
    """Inside one NVSwitch node DDP hides all but the last bucket behind backward: the
    exposed share stays small (well under 10%) but is never zero, and iteration time only
    grows by what is exposed."""
    _, it = iterations
    for n in GPUS:
        share = it[n].exposed_comm_s / it[n].time_s
        assert 0.0 < share < 0.10
        assert it[n].time_s == pytest.approx(it[1].time_s + it[n].exposed_comm_s)
        assert it[n].exposed_comm_s <= it[n].comm_s
    assert 0.02 < it[8].time_s < 1.0  # 64 fp32 images through ResNet-50 on an A100
