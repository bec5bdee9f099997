"""Data-parallel ResNet training (train/_cnn.py) and scenario X4: ResNet-50 on 2/4/8 A100s,
iteration time and the communication overhead share, asked through `perfcast train`. The
shared data holds no measured DDP ResNet-50 run: these check the forecast's mechanics and
shape against hand-derived quantities, not its accuracy."""

import json

import pytest
from typer.testing import CliRunner

from perfcast.cli import app
from perfcast.errors import InputError
from perfcast.specs import get_cluster
from perfcast.train import cnn_training_ops, forecast_cnn_training

RESNET50_WEIGHTS = 25.5e6  # torchvision: 25.56M parameters incl. BN and biases


def _x4(n: int) -> dict:
    res = CliRunner().invoke(app, ["train", "--model", "resnet50", "--cluster", "dgx-a100",
                                   "--num-gpus", str(n), "--micro-batch", "64", "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def x4():
    return {n: _x4(n) for n in (1, 2, 4, 8)}


def test_x4_comm_share_grows_with_gpu_count_and_stays_small_inside_a_node(x4):
    """Inside one NVSwitch node DDP hides all but the last 25 MB bucket behind backward: the
    exposed share is never zero past one GPU, grows with the ring's 2(N-1)/N traffic, and
    stays well under the compute."""
    assert x4[1]["exposed_comm_s"] == 0.0 and x4[1]["allreduce_s"] == 0.0
    shares = [x4[n]["comm_share"] for n in (2, 4, 8)]
    assert 0 < shares[0] < shares[1] < shares[2] < 0.05
    assert [x4[n]["allreduce_s"] for n in (2, 4, 8)] == sorted(
        x4[n]["allreduce_s"] for n in (2, 4, 8))


def test_x4_weak_scaling_adds_only_the_exposed_communication(x4):
    for n in (2, 4, 8):
        extra = x4[n]["iteration_time_s"] - x4[1]["iteration_time_s"]
        assert extra == pytest.approx(x4[n]["exposed_comm_s"], rel=1e-9, abs=1e-12)
        assert x4[n]["images_per_s"] == pytest.approx(
            64 * n / x4[n]["iteration_time_s"], rel=1e-12)


def test_gradients_are_the_fp32_weights():
    fc = forecast_cnn_training("resnet50", get_cluster("dgx-a100", 8), 8, 32)
    assert fc.gradient_bytes == pytest.approx(4 * RESNET50_WEIGHTS, rel=0.01)


def test_backward_doubles_the_matmul_flops():
    ops = cnn_training_ops("resnet50", 8)
    mm = ops["family"].isin(["conv", "gemm"])
    flops = (ops["flops"] * ops["count"])
    assert flops[mm & (ops["phase"] == "backward")].sum() == pytest.approx(
        2 * flops[mm & (ops["phase"] == "forward")].sum(), rel=1e-12)


def test_gradient_accumulation_repeats_compute_and_reduces_once():
    cluster = get_cluster("dgx-a100", 8)
    one = forecast_cnn_training("resnet50", cluster, 8, 32)
    four = forecast_cnn_training("resnet50", cluster, 8, 32, global_batch=4 * 32 * 8)
    assert four.compute_s == pytest.approx(4 * one.compute_s, rel=1e-12)
    assert four.exposed_comm_s == pytest.approx(one.exposed_comm_s, rel=1e-12)
    assert four.images_per_s > one.images_per_s


@pytest.mark.parametrize("kwargs, field", [
    ({"name": "vgg16"}, "model"), ({"num_gpus": 16}, "num_gpus"),
    ({"global_batch": 100}, "global_batch"), ({"dtype": "fp8"}, "dtype")])
def test_bad_input_names_its_field(kwargs, field):
    args = {"name": "resnet50", "cluster": get_cluster("dgx-a100", 8), "num_gpus": 8,
            "micro_batch": 32} | kwargs
    with pytest.raises(InputError) as e:
        forecast_cnn_training(**args)
    assert e.value.field == field


def test_cli_refuses_model_parallel_flags_for_a_cnn():
    res = CliRunner().invoke(app, ["train", "--model", "resnet50", "--gpu", "a100-sxm4-80gb",
                                   "--num-gpus", "8", "--zero", "2"])
    assert res.exit_code == 2 and "zero" in res.stderr
