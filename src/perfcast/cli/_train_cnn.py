"""`perfcast train --model resnet50 ...`: the table of a ResNet's data-parallel iteration."""

from __future__ import annotations

from perfcast.api import CNNTrainResult
from perfcast.cli._console import Table, new_console

__all__ = ["print_cnn"]


def print_cnn(result: CNNTrainResult) -> None:
    fc, inputs = result.forecast, result.inputs
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
    console = new_console()
    console.print(t)
    for note in fc.notes:
        console.print(f"note: {note}")
