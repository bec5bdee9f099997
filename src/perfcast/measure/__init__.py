"""Measurements: the shipped kernel store, its schema, and microbenchmarks of this machine."""

from perfcast.measure._cpu import local_cpu_device
from perfcast.measure._harness import run_cpu_sweep, run_gpu_sweep
from perfcast.measure._sampling import sample_per_group
from perfcast.measure._schema import STORE_COLUMNS, TIMING_METHODS, check_measurements
from perfcast.measure._store import load_store, query, to_ops

__all__ = [
    "STORE_COLUMNS", "TIMING_METHODS", "check_measurements", "load_store", "local_cpu_device",
    "query", "run_cpu_sweep", "run_gpu_sweep", "sample_per_group", "to_ops",
]
