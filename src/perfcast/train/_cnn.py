"""Data-parallel training of the torchvision ResNets (`ops.CNN_MODELS`): PyTorch DDP, eager
kernels, SGD with momentum. The setting of scenario X4 and of the classic DP-scaling studies.

fp16/bf16 is torch.autocast mixed precision: the kernels (activations, convs on the tensor
cores) in that dtype, the parameters, gradients, all-reduce and SGD state in fp32.

One iteration per GPU: `accumulation` micro-batches of forward + backward, then the optimizer
step. DDP all-reduces the fp32 gradients in 25 MB buckets while the last micro-batch's backward
runs (`compose.data_parallel_step`: the last bucket, or what outlasts backward if that is
more, is exposed); earlier micro-batches skip the all-reduce (`no_sync`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pandas as pd

from perfcast.comm import CollectiveModel, default_collective_model
from perfcast.compose import data_parallel_step, step_time
from perfcast.errors import InputError
from perfcast.kernels import ExecutionTimeModel, model_notes
from perfcast.ops import CNN_MODELS, cnn_ops
from perfcast.ops._diffusion import conv_math
from perfcast.specs import Cluster, DType, bytes_per_element
from perfcast.train._forecast import default_time_model

__all__ = ["CNN_DTYPES", "CNNTrainForecast", "cnn_training_ops", "forecast_cnn_training"]

# torch.optim.SGD with momentum: buf = momentum * buf + grad; param -= lr * buf (fp32 state):
# reads param, grad and buf, writes param and buf; 3 FLOPs per parameter.
SGD_READ_BYTES, SGD_WRITE_BYTES, SGD_FLOPS = 12, 8, 3
_MATMUL = ("conv", "gemm")
# fp32, or torch.autocast mixed precision (fp16/bf16 kernels, fp32 parameters and optimizer):
# half-precision convs run on the tensor cores, and fp32 ones in TF32 where the GPU has it
# (PyTorch's cudnn.allow_tf32 default; perfcast.kernels._physics, borrowed η_c).
CNN_DTYPES = (DType.FP32, DType.BF16, DType.FP16)


@dataclass(frozen=True)
class CNNTrainForecast:
    """One DDP iteration: seconds, images/s over all GPUs, the gradient all-reduce (total and
    the exposed part), model FLOP/s per GPU (forward x 3) and memory per GPU. `notes` says
    where the kernel model borrowed an efficiency (tensor-core convs)."""

    model: str
    num_gpus: int
    iteration_time_s: float
    images_per_s: float
    compute_s: float
    optimizer_s: float
    allreduce_s: float
    exposed_comm_s: float
    comm_share: float
    gradient_bytes: float
    tflops_per_gpu: float
    mfu: float
    memory_per_gpu_bytes: float
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def _matmul_backward(row: dict, elem: float) -> list[dict]:
    """dgrad and wgrad of a conv (implicit GEMM m = N·P·Q, n = C_out, k = C_in·R·S) or
    linear: each as many FLOPs as the forward, shapes transposed as in ops.training_ops."""
    w_bytes = row["n"] * row["k"] * elem
    x_bytes = max(row["bytes_read"] - w_bytes, 0.0)  # the layer's input, read once
    dy_bytes = row["bytes_written"]
    return [{**row, "op": row["op"] + "_dgrad", "n": row["k"], "k": row["n"],
             "bytes_read": dy_bytes + w_bytes, "bytes_written": x_bytes},
            {**row, "op": row["op"] + "_wgrad", "m": row["k"], "k": row["m"],
             "bytes_read": dy_bytes + x_bytes, "bytes_written": w_bytes}]


def cnn_training_ops(name: str, batch_size: int, dtype: DType | str = DType.FP32,
                     image_size: int = 224, tf32: bool = False) -> pd.DataFrame:
    """Forward (`ops.cnn_ops`) and backward kernels of one micro-batch: convs and the
    classifier get a data- and a weight-gradient kernel, every other kernel one backward pass
    reading its input and output gradient and writing the input gradient. `tf32`: fp32
    convolutions (and their gradients) on TF32 tensor cores, PyTorch's cuDNN default."""
    forward = cnn_ops(name, batch_size, image_size, precision=dtype, tf32=tf32)
    elem = bytes_per_element(DType(dtype))
    rows = []
    for row in forward.to_dict("records"):
        if row["family"] in _MATMUL:
            rows += _matmul_backward(row, elem)
        else:
            rows.append({**row, "op": row["op"] + "_bwd",
                         "bytes_read": row["bytes_read"] + row["bytes_written"],
                         "bytes_written": row["bytes_read"]})
    backward = pd.DataFrame(rows, columns=forward.columns).assign(phase="backward")
    return pd.concat([forward, backward], ignore_index=True)


def _weights(forward: pd.DataFrame) -> float:
    mm = forward[forward["family"].isin(_MATMUL) & (forward["phase"] == "forward")]
    return float((mm["n"] * mm["k"] * mm["count"]).sum())


def _check(name: str, num_gpus: int, micro_batch: int, global_batch: int | None,
           cluster: Cluster, dtype: DType | str) -> int:
    if name not in CNN_MODELS:
        raise InputError("model", f"unknown CNN {name!r}", CNN_MODELS)
    allowed = [d.value for d in CNN_DTYPES]
    try:
        dt = DType(str(dtype).lower())
    except ValueError:
        raise InputError("dtype", f"unknown dtype {dtype!r}", allowed) from None
    if dt not in CNN_DTYPES:
        raise InputError("dtype", f"CNN training in {dt.value}: torch.autocast trains in "
                         "fp16/bf16 or fp32", allowed)
    if num_gpus < 1 or num_gpus > cluster.num_gpus:
        raise InputError("num_gpus", f"{num_gpus} GPUs on a {cluster.num_gpus}-GPU cluster",
                         f"1..{cluster.num_gpus}")
    if micro_batch < 1:
        raise InputError("micro_batch", f"must be >= 1, got {micro_batch}", ">= 1")
    per_step = micro_batch * num_gpus
    global_batch = global_batch or per_step
    if global_batch % per_step:
        raise InputError("global_batch", f"{global_batch} images do not split into "
                         f"micro-batches of {micro_batch} on {num_gpus} GPUs",
                         f"a multiple of {per_step}")
    return global_batch // per_step


def forecast_cnn_training(name: str, cluster: Cluster, num_gpus: int, micro_batch: int,
                          global_batch: int | None = None, dtype: DType | str = DType.FP32,
                          time_model: ExecutionTimeModel | None = None,
                          comm_model: CollectiveModel | None = None) -> CNNTrainForecast:
    """One DDP iteration of ResNet `name` on `num_gpus` GPUs of `cluster`, `micro_batch`
    images per GPU per pass (module docstring); `global_batch` images per iteration (default
    one micro-batch per GPU)."""
    steps = _check(name, num_gpus, micro_batch, global_batch, cluster, dtype)
    dtype = DType(str(dtype).lower())
    time_model = time_model or default_time_model()
    # PyTorch lets cuDNN run fp32 convolutions in TF32 where the GPU has it (allow_tf32)
    tf32 = DType.TF32 in cluster.device.dense_peak_flops
    ops = cnn_training_ops(name, micro_batch, dtype, tf32=tf32)
    params = _weights(ops)
    opt = pd.DataFrame([{"layer": "optimizer", "op": "sgd", "family": "elementwise",
                         "phase": "optimizer", "b": 1, "m": params, "n": 1.0, "k": 0.0,
                         "flops": SGD_FLOPS * params, "bytes_read": SGD_READ_BYTES * params,
                         "bytes_written": SGD_WRITE_BYTES * params, "dtype": "fp32",
                         "count": 1}], columns=ops.columns)
    one = step_time(ops, cluster, "eager", time_model=time_model)
    opt_s = step_time(opt, cluster, "eager", time_model=time_model).time_s
    grad_bytes = 4.0 * params  # DDP reduces the fp32 .grad of the fp32 parameters (AMP too)
    ddp = data_parallel_step(one, grad_bytes, cluster, num_gpus,
                             comm_model or default_collective_model())
    time_s = (steps - 1) * one.time_s + ddp.time_s + opt_s
    fwd_flops = float((ops["flops"] * ops["count"])[ops["phase"] == "forward"].sum())
    model_flops = 3.0 * fwd_flops * steps  # forward + backward (2x forward) per micro-batch
    peak = cluster.device.peak_flops(conv_math(dtype, tf32), "dtype")  # the convs' units
    acts = float((ops["bytes_written"] * ops["count"])[ops["phase"] == "forward"].sum())
    return CNNTrainForecast(
        model=name, num_gpus=num_gpus, iteration_time_s=time_s,
        images_per_s=steps * micro_batch * num_gpus / time_s,
        compute_s=steps * one.time_s, optimizer_s=opt_s, allreduce_s=ddp.comm_s,
        exposed_comm_s=ddp.exposed_comm_s, comm_share=ddp.exposed_comm_s / time_s,
        gradient_bytes=grad_bytes, tflops_per_gpu=model_flops / time_s / 1e12,
        mfu=model_flops / (time_s * peak),
        # fp32 weights, gradients and momentum + every forward output kept for backward
        memory_per_gpu_bytes=3 * 4.0 * params + acts, notes=model_notes(time_model, ops))
