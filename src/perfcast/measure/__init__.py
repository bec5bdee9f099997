"""Measurements: the shipped kernel store, its schema, and microbenchmarks of this machine."""

from perfcast.measure._cpu import local_cpu_device, with_achieved_peak
from perfcast.measure._gpu import (
    CaseTiming,
    DeviceBackend,
    FakeDeviceBackend,
    estimate_sweep_s,
    measure_launch_s,
    run_collective_sweep,
    run_gpu_sweep,
    run_torch_sweep,
    time_case,
)
from perfcast.measure._gpu_cases import KernelCase, kernel_cases
from perfcast.measure._harness import SweepInterrupted, run_cpu_sweep
from perfcast.measure._model_steps import (
    ModelStepPlan,
    StepMeasurement,
    StepMeasurements,
    load_steps,
    plan_model_steps,
    run_model_steps,
)
from perfcast.measure._sampling import sample_per_group, sample_positions
from perfcast.measure._schema import STORE_COLUMNS, TIMING_METHODS, check_measurements
from perfcast.measure._store import load_store, query, to_ops
from perfcast.measure._torch_cpu import (
    TORCH_OPS,
    measure_torch_dispatch_s,
    run_torch_cpu_sweep,
    time_torch_call,
    torch_sweep_shapes,
)

__all__ = [
    "ModelStepPlan", "StepMeasurement", "StepMeasurements", "load_steps", "plan_model_steps",
    "run_model_steps",
    "STORE_COLUMNS", "TIMING_METHODS", "TORCH_OPS", "SweepInterrupted", "check_measurements",
    "load_store", "local_cpu_device", "measure_torch_dispatch_s", "query", "run_cpu_sweep",
    "run_gpu_sweep",
    "CaseTiming", "DeviceBackend", "FakeDeviceBackend", "KernelCase", "estimate_sweep_s",
    "kernel_cases", "measure_launch_s", "run_collective_sweep", "run_torch_sweep", "time_case",
    "run_torch_cpu_sweep", "sample_per_group", "sample_positions", "time_torch_call", "to_ops",
    "torch_sweep_shapes",
    "with_achieved_peak",
]
