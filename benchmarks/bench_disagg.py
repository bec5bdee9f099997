"""Disaggregated serving replay time (issue 22: one 512-concurrency point <= 10 s,
`perfcast validate serving --mode disagg` <= 3 min). Run:
`python benchmarks/bench_disagg.py [--point ID] [--runs 3] [--validate]` (not part of
`pytest`); `PYTHONPATH=OTHER/src python benchmarks/bench_disagg.py` times another checkout.

One point (default: the first shipped point of concurrency 512) is replayed as the
validation replays it (`perfcast.validate.disagg_point`, perfcast's kernel model): once cold
(a fresh process: both pools' step models built and their grids priced, which the
validation pays once per deployment) and then `--runs` times warm (step models kept); wall
and CPU seconds are printed, the median of the warm runs, and a verdict on the cold wall
time. `--validate` also times the whole `perfcast validate serving --mode disagg` command (a
fresh process of the entry point beside this Python; both methods, every point).

On a shared machine the wall time follows the load: the load average is printed with each
number, and CPU seconds are the steadier measure.

Measured 2026-11-27 on the shared 2-core machine (load average ~2-3), CPU seconds, before =
the fixed-point sweeps (7 of them: 14 pool simulations of 5,120 requests) on the same
engine, after = one simulation of both pools and one step model per pool deployment:

    point (concurrency)                  cold before / after    warm before / after
    sglang_fp4 1024x1024 c512 cfg527        7.0 / 2.3              5.4 / 0.56
    sglang_fp4 1024x1024 c512 cfg532       11.5 / 2.4              9.9 / 0.64
    validate serving --mode disagg: 87.5 s wall, 76 s CPU (before: 2,483 s for its points'
    replays at load ~9; issue 22: ~29 min)

Measured 2026-11-28 on a slower 2-core machine (`python -c pass` 0.08 s, load average ~1),
before = `git archive 4ae2bdc src` on PYTHONPATH, after = a MoE model's token grid priced
from one op table for all its points (compose._serving_parts `_rows_per_point`) and the
routing draws vectorised (kernels._moe); the replays' numbers are the same:

    cfg527 cold point                     6.01 s wall before, 4.40 s after
    cfg527 warm (median of 3)             1.72 s / 1.93 s
    validate serving --mode disagg      229.5 s wall before (over the 180 s target on this
                                          machine), 177.8 s after
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_POINT_S = 10.0  # one 512-concurrency point
TARGET_VALIDATE_S = 180.0  # perfcast validate serving --mode disagg
CONCURRENCY = 512


def timed(fn) -> tuple[float, float, object]:
    """(wall s, CPU s of this process, result) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def verdict(seconds: float, target: float) -> str:
    return f"meets <= {target:.0f} s" if seconds <= target else f"BELOW target ({target:.0f} s)"


def load() -> str:
    return f"load average {os.getloadavg()[0]:.1f}"


def bench_point(point_id: str | None, runs: int) -> None:
    from perfcast.validate import disagg_point, load_disagg_points

    points = load_disagg_points()
    pick = points[points["point_id"] == point_id] if point_id else \
        points[points["concurrency"] == CONCURRENCY]
    if pick.empty:
        raise SystemExit(f"no point {point_id or f'of concurrency {CONCURRENCY}'}")
    point = pick.iloc[0]
    print(f"point {point['point_id']} (concurrency {point['concurrency']})")
    wall, cpu, (ttft, tpot) = timed(lambda: disagg_point(point))
    print(f"  cold: {wall:6.2f} s wall, {cpu:6.2f} s CPU ({load()}); mean TTFT {ttft:.6f} s, "
          f"TPOT {tpot:.6f} s")
    warm = [timed(lambda: disagg_point(point))[:2] for _ in range(runs)]
    if warm:
        print(f"  warm: {statistics.median(w for w, _ in warm):6.2f} s wall, "
              f"{statistics.median(c for _, c in warm):6.2f} s CPU (median of {runs}; "
              f"{load()})")
    print(f"  one point: {verdict(wall, TARGET_POINT_S)} (cold wall)")


def bench_validate() -> None:
    exe = Path(sys.executable).with_name("perfcast")
    if not exe.is_file():
        raise SystemExit(f"no perfcast entry point at {exe}: pip install -e . first")
    cmd = [str(exe), "validate", "serving", "--mode", "disagg", "--format", "csv"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, _, done = timed(lambda: subprocess.run(cmd, capture_output=True, text=True))
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(f"validate serving --mode disagg: {wall:7.1f} s wall, {cpu:7.1f} s CPU ({load()})")
    print(f"  validation: {verdict(wall, TARGET_VALIDATE_S)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--point", help="point_id (default: the first of concurrency 512)")
    parser.add_argument("--runs", type=int, default=3, help="warm runs (median)")
    parser.add_argument("--validate", action="store_true",
                        help="also time `perfcast validate serving --mode disagg`")
    args = parser.parse_args()
    bench_point(args.point, args.runs)
    if args.validate:
        bench_validate()


if __name__ == "__main__":
    main()
