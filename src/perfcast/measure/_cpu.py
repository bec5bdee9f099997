"""The machine perfcast runs on, as a perfcast `Device`: its CPU cores in place of SMs and its
DRAM in place of HBM. Spec-sheet numbers come from /proc and /sys; the bandwidth and the call
overhead are measured (numpy), and `sources` says how each number was found."""

from __future__ import annotations

import math
import os
import platform
import re
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.errors import InputError
from perfcast.specs import Device, DType

__all__ = ["CPU_DEVICE_NAME", "DEFAULT_BANDWIDTH_PER_THREAD_BPS", "CpuInfo", "cpu_info",
           "fp32_flops_per_cycle", "local_cpu_device", "measure_call_overhead_s",
           "measure_triad_bandwidth_bps", "with_achieved_peak"]

CPU_DEVICE_NAME = "local-cpu"
# Used when the bandwidth is not measured: a conservative single-core DRAM stream rate (one
# modern server or desktop core streams 10-30 GB/s); measure for the real number.
DEFAULT_BANDWIDTH_PER_THREAD_BPS = 8e9
DEFAULT_L2_BANDWIDTH_FACTOR = 4.0  # cache-resident streams vs DRAM, when not measured
# Assumed when neither cpufreq, the model name nor /proc/cpuinfo gives a clock.
DEFAULT_CLOCK_HZ = 2.0e9

_PROC_CPUINFO = Path("/proc/cpuinfo")
_PROC_MEMINFO = Path("/proc/meminfo")
_SYS_CPU0 = Path("/sys/devices/system/cpu/cpu0")
_VENDORS = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD", "0x41": "Arm", "0x61": "Apple"}


@dataclass(frozen=True)
class CpuInfo:
    """What the OS says about the CPU; None / empty where it says nothing."""

    vendor: str
    model: str
    flags: frozenset[str]
    logical_cpus: int
    max_clock_hz: float | None
    clock_source: str
    caches: dict[int, tuple[float, int]] = field(default_factory=dict)  # level -> (bytes, sharing)
    mem_total_bytes: float | None = None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _cpuinfo_blocks(text: str) -> list[dict[str, str]]:
    blocks = []
    for chunk in text.strip().split("\n\n"):
        entry = {}
        for line in chunk.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                entry[key.strip()] = value.strip()
        if entry:
            blocks.append(entry)
    return blocks


def _size_bytes(text: str) -> float | None:
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)B?\s*", text)
    if not match:
        return None
    return float(match[1]) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[match[2]]


def _cpu_list_count(text: str) -> int:
    count = 0
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        if lo.strip().isdigit():
            count += int(hi) - int(lo) + 1 if hi.strip().isdigit() else 1
    return max(count, 1)


def _caches() -> dict[int, tuple[float, int]]:
    """Data/unified cache per level: (bytes of one instance, logical CPUs sharing it)."""
    caches: dict[int, tuple[float, int]] = {}
    for index in sorted(_SYS_CPU0.glob("cache/index*")):
        level, kind, size = (_read(index / f) for f in ("level", "type", "size"))
        if not (level and kind and size) or kind.strip() == "Instruction":
            continue
        nbytes = _size_bytes(size)
        shared = _read(index / "shared_cpu_list")
        if nbytes:
            caches[int(level)] = (nbytes, _cpu_list_count(shared) if shared else 1)
    return caches


def _mem_total_bytes() -> float | None:
    text = _read(_PROC_MEMINFO) or ""
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.MULTILINE)
    if match:
        return float(match[1]) * 1024
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def _max_clock(blocks: list[dict[str, str]], model: str) -> tuple[float | None, str]:
    max_freq = _read(_SYS_CPU0 / "cpufreq" / "cpuinfo_max_freq")
    if max_freq and max_freq.strip().isdigit():
        return float(max_freq) * 1e3, f"{_SYS_CPU0}/cpufreq/cpuinfo_max_freq (kHz)"
    match = re.search(r"@\s*([\d.]+)\s*GHz", model)
    if match:
        return float(match[1]) * 1e9, f"nominal clock in the CPU model name {model!r}"
    mhz = [float(b["cpu MHz"]) for b in blocks if b.get("cpu MHz", "").replace(".", "").isdigit()]
    if mhz:
        return max(mhz) * 1e6, "/proc/cpuinfo 'cpu MHz' (max over logical CPUs)"
    return None, ""


def cpu_info() -> CpuInfo:
    """The CPU as /proc/cpuinfo, /proc/meminfo and /sys describe it (platform as a fallback)."""
    blocks = _cpuinfo_blocks(_read(_PROC_CPUINFO) or "")
    first = blocks[0] if blocks else {}
    raw_vendor = first.get("vendor_id") or first.get("CPU implementer") or ""
    vendor = _VENDORS.get(raw_vendor, raw_vendor) or platform.system() or "unknown"
    model = (first.get("model name") or first.get("Model") or first.get("Hardware")
             or platform.processor() or platform.machine() or "unknown")
    flags = frozenset((first.get("flags") or first.get("Features") or "").split())
    clock, clock_source = _max_clock(blocks, model)
    return CpuInfo(vendor=vendor, model=model, flags=flags, logical_cpus=os.cpu_count() or 1,
                   max_clock_hz=clock, clock_source=clock_source, caches=_caches(),
                   mem_total_bytes=_mem_total_bytes())


def fp32_flops_per_cycle(flags: frozenset[str] | set[str]) -> tuple[int, str]:
    """Peak fp32 FLOPs per cycle per core from the ISA flags, and how it was derived."""
    if "avx512f" in flags:
        return 64, "avx512f: 2 FMA units x 16 fp32 lanes x 2 FLOPs/FMA = 64 FLOPs/cycle"
    if "avx2" in flags and "fma" in flags:
        return 32, "avx2+fma: 2 FMA units x 8 fp32 lanes x 2 FLOPs/FMA = 32 FLOPs/cycle"
    if "asimd" in flags:
        return 16, "asimd (NEON): 2 FMA units x 4 fp32 lanes x 2 FLOPs/FMA = 16 FLOPs/cycle"
    return 8, "sse: 4-lane add + 4-lane multiply per cycle = 8 FLOPs/cycle"


def _median_ns(fn, repeats: int, inner: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter_ns() - start) / inner)
    return statistics.median(samples)


def measure_call_overhead_s(repeats: int = 7, inner: int = 2000) -> float:
    """Median seconds of one numpy ufunc call on 1-element arrays: the CPU's 'launch' cost."""
    x, y, z = (np.ones(1, dtype=np.float32) for _ in range(3))

    def call() -> None:
        np.add(x, y, out=z)

    call()
    return _median_ns(call, repeats, inner) / 1e9


def measure_triad_bandwidth_bps(threads: int = 1, array_bytes: float | None = None,
                                repeats: int = 5) -> float:
    """STREAM-triad bandwidth (a = b + s*c, 12 bytes per fp32 element, no write-allocate
    counted) of `threads` numpy threads, median of `repeats` after one warm-up pass.

    numpy has no fused triad, so each thread walks its arrays in 64K-element blocks, computing
    s*c into a cache-resident scratch block and adding b into a: DRAM traffic is that of the
    real triad. Each array is at least 4x the last-level cache (64 MiB when unknown)."""
    if threads < 1:
        raise InputError("threads", f"must be >= 1, got {threads}", ">= 1")
    if array_bytes is None:
        info = cpu_info()
        llc = max((size for size, _ in info.caches.values()), default=16 * 1024**2)
        array_bytes = max(4 * llc, 64 * 1024**2)
        if info.mem_total_bytes:  # three arrays: stay under a sixteenth of memory
            array_bytes = min(array_bytes, info.mem_total_bytes / 48)
    elems = max(int(array_bytes // 4 // threads), 1 << 16)
    block = 1 << 16
    # constant data: the triad's speed does not depend on the values, and filling is a
    # memory-speed pass where drawing random numbers took seconds of one core
    arrays = [[np.full(elems, v, dtype=np.float32) for v in (0.0, 0.5, 0.25)]
              for _ in range(threads)]
    scratch = [np.empty(block, dtype=np.float32) for _ in range(threads)]
    scalar = np.float32(3.0)

    def triad(i: int) -> None:
        a, b, c = arrays[i]
        tmp = scratch[i]
        for lo in range(0, elems, block):
            hi = min(lo + block, elems)
            t = tmp[: hi - lo]
            np.multiply(c[lo:hi], scalar, out=t)
            np.add(b[lo:hi], t, out=a[lo:hi])

    def run_all() -> None:
        if threads == 1:
            triad(0)
            return
        workers = [threading.Thread(target=triad, args=(i,)) for i in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

    run_all()
    seconds = _median_ns(run_all, repeats, 1) / 1e9
    return 12.0 * elems * threads / seconds


def local_cpu_device(threads: int = 1, measure_bandwidth: bool = True) -> Device:
    """This machine's CPU as a perfcast Device, `threads` cores standing in for SMs.

    fp32 is the only dtype with a peak (numpy's BLAS has no fp16/bf16 GEMM). Reads /proc and
    /sys, and (with `measure_bandwidth`) runs a ~1 s numpy triad; `sources` records how every
    number was found."""
    if threads < 1:
        raise InputError("threads", f"must be >= 1, got {threads}", ">= 1")
    info = cpu_info()
    per_cycle, per_cycle_how = fp32_flops_per_cycle(info.flags)
    clock, clock_how = info.max_clock_hz, info.clock_source
    if clock is None:
        clock_how = f"unknown; assumed {DEFAULT_CLOCK_HZ / 1e9:g} GHz (perfcast default)"
    clock_for_peak = clock or DEFAULT_CLOCK_HZ
    peak = threads * clock_for_peak * per_cycle
    sources = {
        "name": "perfcast: the local CPU",
        "vendor": "/proc/cpuinfo vendor_id" if _PROC_CPUINFO.exists() else "platform.system()",
        "arch": "/proc/cpuinfo 'model name'" if _PROC_CPUINFO.exists() else "platform",
        "sm_count": f"threads used ({threads}); the machine has {info.logical_cpus} logical CPUs",
        "boost_clock_hz": clock_how,
        "dense_peak_flops.fp32": (
            f"{threads} thread(s) x {clock_for_peak / 1e9:.3f} GHz x {per_cycle} FLOPs/cycle "
            f"({per_cycle_how}); an ISA upper bound (parts that split 512-bit ops into two "
            "256-bit halves reach half)"),
    }

    if measure_bandwidth:
        bandwidth = measure_triad_bandwidth_bps(threads)
        sources["hbm_bandwidth_bps"] = (
            f"measured: numpy STREAM triad a = b + s*c, {threads} thread(s), arrays >= 4x "
            "last-level cache, 12 bytes/element, median of 5 (DRAM, not HBM)")
    else:
        bandwidth = DEFAULT_BANDWIDTH_PER_THREAD_BPS * threads
        sources["hbm_bandwidth_bps"] = (
            f"not measured: perfcast default {DEFAULT_BANDWIDTH_PER_THREAD_BPS / 1e9:g} GB/s per "
            "thread (conservative single-core DRAM stream rate)")

    capacity = info.mem_total_bytes
    if capacity:
        sources["hbm_capacity_bytes"] = ("/proc/meminfo MemTotal" if _PROC_MEMINFO.exists()
                                         else "sysconf pages x page size")
    else:
        capacity = 1024.0**3
        sources["hbm_capacity_bytes"] = "unknown; assumed 1 GiB (perfcast default)"

    # The Device has one cache level between the cores and DRAM: the last-level cache, where
    # the working sets of one model layer live (ResNet activations, a GPT-2 block's weights).
    l2 = None
    level = max(info.caches, default=None)
    if level is not None:
        size, sharing = info.caches[level]
        instances = math.ceil(threads / sharing)
        l2 = size * instances
        sources["l2_bytes"] = (f"{_SYS_CPU0}/cache: {size / 1024:.0f} KiB L{level} (the last "
                               f"level) shared by {sharing} logical CPU(s) x {instances} "
                               f"instance(s) for {threads} thread(s)")

    l2_bw = None
    if l2 and measure_bandwidth:
        l2_bw = measure_triad_bandwidth_bps(threads, array_bytes=l2 / 8)
        sources["l2_bandwidth_bps"] = (
            "measured: the same triad on arrays of an eighth of the last-level cache (the "
            "three stay resident)")
    elif l2:
        l2_bw = DEFAULT_L2_BANDWIDTH_FACTOR * bandwidth
        sources["l2_bandwidth_bps"] = (f"not measured: {DEFAULT_L2_BANDWIDTH_FACTOR:g}x the "
                                       "DRAM figure (perfcast default)")

    overhead = measure_call_overhead_s()
    sources["kernel_launch_overhead_s"] = (
        "measured: median seconds of one numpy ufunc call (np.add) on 1-element fp32 arrays")

    return Device(
        kind="cpu",
        name=CPU_DEVICE_NAME, vendor=info.vendor, arch=info.model, sm_count=threads,
        boost_clock_hz=clock, dense_peak_flops={DType.FP32: peak},
        hbm_capacity_bytes=capacity, hbm_bandwidth_bps=bandwidth, l2_bytes=l2,
        l2_bandwidth_bps=l2_bw, kernel_launch_overhead_s=overhead, sources=sources,
    )


def with_achieved_peak(spec: Device, df: pd.DataFrame) -> Device:
    """The CPU spec with each dtype's peak raised to the fastest GEMM or conv in `df` (the
    store-schema rows a sweep timed on it), where that beat it: a derived peak is cores x
    clock x FLOPs/cycle, and the clock read from /proc is the current one, not the turbo the
    cores reach under load. A roofline below a measurement would clamp every calibrated
    forecast to it."""
    compute = df[df["family"].isin(("gemm", "conv")) & (df["flops"] > 0)]
    peaks, sources = dict(spec.dense_peak_flops), dict(spec.sources)
    for dtype, peak in spec.dense_peak_flops.items():
        name = getattr(dtype, "value", str(dtype))
        rows = compute[compute["dtype"] == name]
        if rows.empty:
            continue
        rates = rows["flops"] / rows["latency_s"]
        best = float(rates.max())
        if best > peak:
            fastest = rows.loc[rates.idxmax()]
            peaks[dtype] = best
            sources[f"dense_peak_flops.{name}"] = (
                f"measured: the fastest {fastest['family']} of this sweep ({fastest['op']}, "
                f"m={fastest['m']:g} n={fastest['n']:g} k={fastest['k']:g}) ran at "
                f"{best / 1e9:,.1f} GFLOP/s, above the derived {peak / 1e9:,.1f} "
                f"({spec.sources.get(f'dense_peak_flops.{name}', 'derived')})")
    return spec.model_copy(update={"dense_peak_flops": peaks, "sources": sources})
