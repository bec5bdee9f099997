"""Measurements: the shipped kernel store, its schema, and microbenchmarks of this machine.

Names load on first use (PEP 562): `measure --help` loads no harness, store nor torch."""

from perfcast import _lazy_exports

# Submodule -> the public names it provides, each imported on first use.
_EXPORTS = {
    "_cpu": ("local_cpu_device", "with_achieved_peak"),
    "_gpu": ("CaseTiming", "DeviceBackend", "FakeDeviceBackend", "estimate_sweep_s",
        "measure_launch_s", "run_collective_sweep", "run_gpu_sweep", "run_torch_sweep",
        "time_case"),
    "_gpu_cases": ("KernelCase", "kernel_cases"),
    "_harness": ("SweepInterrupted", "run_cpu_sweep"),
    "_model_steps": ("ModelStepPlan", "StepMeasurement", "StepMeasurements", "load_steps",
        "plan_model_steps", "run_model_steps"),
    "_sampling": ("sample_per_group", "sample_positions"),
    "_schema": ("STORE_COLUMNS", "TIMING_METHODS", "check_measurements"),
    "_store": ("load_store", "query", "to_ops"),
    "_torch_cpu": ("TORCH_OPS", "measure_torch_dispatch_s", "run_torch_cpu_sweep",
        "time_torch_call", "torch_sweep_shapes"),
}
__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)

__all__ = [name for names in _EXPORTS.values() for name in names]  # pinned: tests
