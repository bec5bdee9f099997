"""`perfcast train --model resnet50 ...`: data-parallel training of a torchvision ResNet."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from perfcast import __version__
from perfcast.cli._common import emit_json
from perfcast.errors import InputError
from perfcast.kernels import ExecutionTimeModel
from perfcast.specs import Cluster
from perfcast.train import CNNTrainForecast, forecast_cnn_training

__all__ = ["train_cnn"]


def train_cnn(model: str, machines: Cluster, num_gpus: int, micro_batch: int,
              global_batch: int | None, dtype: str, time_model: ExecutionTimeModel,
              info: dict, transformer_only: dict, json_out: bool) -> None:
    """Forecast and print one DDP iteration; flags only transformers take are refused."""
    for flag, (value, default) in transformer_only.items():
        if value != default:
            raise InputError(flag, f"{model} trains data-parallel only (PyTorch DDP)",
                             f"{default!r} (the default) for a CNN")
    fc = forecast_cnn_training(model, machines, num_gpus, micro_batch, global_batch, dtype,
                               time_model)
    inputs = {"model": model, "gpu": machines.device.name, "num_gpus": num_gpus,
              "micro_batch": micro_batch, "global_batch": global_batch or micro_batch
              * num_gpus, "dtype": dtype, "kernel_model": info}
    if json_out:
        emit_json({"perfcast_version": __version__, "inputs": inputs, **fc.as_dict()})
        return
    _print(fc, inputs)


def _print(fc: CNNTrainForecast, inputs: dict) -> None:
    t = Table(title=f"{fc.model} DDP on {fc.num_gpus}x {inputs['gpu']} "
              f"({inputs['micro_batch']} images per GPU per pass, {inputs['dtype']})")
    t.add_column("metric")
    t.add_column("value", justify="right")
    for name, value in (("iteration", f"{fc.iteration_time_s * 1e3:.1f} ms"),
                        ("images/s", f"{fc.images_per_s:,.0f}"),
                        ("compute", f"{fc.compute_s * 1e3:.1f} ms"),
                        ("optimizer", f"{fc.optimizer_s * 1e3:.2f} ms"),
                        ("gradient all-reduce (total)", f"{fc.allreduce_s * 1e3:.2f} ms of "
                         f"{fc.gradient_bytes / 1e6:.0f} MB"),
                        ("exposed communication", f"{fc.exposed_comm_s * 1e3:.2f} ms"),
                        ("comm overhead share", f"{fc.comm_share:.2%}"),
                        ("TFLOP/s per GPU", f"{fc.tflops_per_gpu:.1f}"),
                        ("MFU", f"{fc.mfu:.1%}"),
                        ("memory per GPU", f"{fc.memory_per_gpu_bytes / 1e9:.1f} GB")):
        t.add_row(name, value)
    Console().print(t)
