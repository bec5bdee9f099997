"""Convolutions on the tensor cores (issue 17): fp16/bf16 ResNets are priced at the dtype's
tensor peak with the gemm family's tensor-core efficiency (no tensor-core conv measurements
exist), so they come out faster than fp32 on every tensor-core GPU and say so in their notes.
fp32 convolutions run in TF32 where the GPU has it, as PyTorch lets cuDNN by default
(measured on an H100: ResNet-50 fp32 training 71.5 ms, 153.8 ms with allow_tf32 off,
docs/validation/gpu_check/h100_train.md); strict fp32 (`tf32=False`) keeps its calibrated
numbers."""

import numpy as np
import pytest

from perfcast.compose._vision import cnn_inference
from perfcast.kernels import RooflineModel, default_time_model, model_notes
from perfcast.kernels._physics import TENSOR_DONORS
from perfcast.kernels._roofline import peak_flops
from perfcast.ops import cnn_ops
from perfcast.specs import cluster_for, get_device
from perfcast.train import forecast_cnn_training

TENSOR_GPUS = ("a100-sxm4-80gb", "h100-sxm", "l4")
# Pinned before half-precision convs moved to the tensor cores: ResNet-50 strict fp32 (eager
# kernels of one inference forward, batch 64; one DDP training iteration, batch 64).
FP32_FORWARD_KERNELS_S = {"a100-sxm4-80gb": 0.049130783389875185,
                          "h100-sxm": 0.025984034135815078, "l4": 0.17105757374461972}
FP32_TRAIN_ITERATION_S = {"a100-sxm4-80gb": 0.23801547981226534,
                          "h100-sxm": 0.10637036941736543, "l4": 0.5107415450251075}


def _train(gpu: str, dtype: str):
    return forecast_cnn_training("resnet50", cluster_for(get_device(gpu), 1), 1, 64,
                                 dtype=dtype)


@pytest.mark.parametrize("gpu", TENSOR_GPUS)
def test_strict_fp32_resnet50_is_unchanged_and_tf32_is_faster(gpu):
    ops = cnn_ops("resnet50", 64, precision="fp32")
    t = default_time_model().kernel_times(ops, get_device(gpu))
    assert float((t * ops["count"]).sum()) == pytest.approx(FP32_FORWARD_KERNELS_S[gpu],
                                                            rel=1e-9)
    tf32 = cnn_ops("resnet50", 64, precision="fp32", tf32=True)
    assert set(tf32.loc[tf32["family"] == "conv", "dtype"]) == {"tf32"}
    assert set(tf32.loc[tf32["family"] != "conv", "dtype"]) == {"fp32"}  # matmul: no TF32
    assert _train(gpu, "fp32").iteration_time_s < 0.95 * FP32_TRAIN_ITERATION_S[gpu]


def test_a_gpu_without_tf32_keeps_fp32_convs():
    cl = cluster_for(get_device("v100-pcie-32gb"), 1)
    fp32 = forecast_cnn_training("resnet50", cl, 1, 64, dtype="fp32")
    assert not fp32.notes


@pytest.mark.parametrize("gpu", TENSOR_GPUS)
@pytest.mark.parametrize("half", ["bf16", "fp16"])
def test_half_precision_resnet50_trains_faster_than_fp32(gpu, half):
    fp32, fast = _train(gpu, "fp32"), _train(gpu, half)
    assert fast.iteration_time_s < 0.75 * fp32.iteration_time_s
    assert any(f"conv ({half})" in n and "borrowed from gemm" in n for n in fast.notes)
    assert fp32.notes == [n.replace(f"({half})", "(tf32)") for n in fast.notes]


@pytest.mark.parametrize("gpu", TENSOR_GPUS)
@pytest.mark.parametrize("batch", [1, 64])
def test_half_precision_resnet50_inference_is_faster(gpu, batch):
    cl = cluster_for(get_device(gpu), 1)
    fp32, bf16 = (cnn_inference("resnet50", batch, cl, dt) for dt in ("fp32", "bf16"))
    assert bf16.step.time_s < fp32.step.time_s
    assert bf16.images_per_s > fp32.images_per_s
    assert bf16.notes and fp32.notes  # tensor-core convs both: TF32 for fp32


def test_convs_take_the_tensor_peak_only_in_half_precision():
    dev = get_device("a100-sxm4-80gb")
    fp32, bf16 = cnn_ops("resnet50", 8, precision="fp32"), cnn_ops("resnet50", 8,
                                                                    precision="bf16")
    conv32 = (fp32["family"] == "conv").to_numpy()
    conv16 = (bf16["family"] == "conv").to_numpy()
    assert np.all(peak_flops(fp32, dev)[conv32] == dev.peak_flops("fp32"))  # SIMT, 19.5 TF
    assert np.all(peak_flops(bf16, dev)[conv16] == dev.peak_flops("bf16"))  # tensor, 312 TF


def test_notes_name_the_donor_family():
    model = default_time_model()
    notes = model_notes(model, cnn_ops("resnet18", 2, precision="fp16"))
    assert notes == ["tensor-core conv (fp16): no measured tensor-core conv kernels; "
                     f"their efficiency borrowed from {TENSOR_DONORS['conv']}"]
    assert model_notes(model, cnn_ops("resnet18", 2)) == []
    assert model_notes(RooflineModel(), cnn_ops("resnet18", 2, precision="fp16")) == []
