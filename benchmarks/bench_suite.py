"""Speed of `perfcast suite`. Run: `python benchmarks/bench_suite.py [--workers 1 2]` (not part
of `pytest`). Target (issue 22): the whole suite in at most 40 s on 2 cores.

Prints the suite's wall time per worker count, the slowest scenarios (their own wall time
inside a worker), and the speed-up of the process pool over one process.
"""

from __future__ import annotations

import argparse
import time

from perfcast.suite import builtin_scenarios, run_suite

TARGET_S = 40.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    scenarios = builtin_scenarios()
    walls = {}
    for workers in args.workers:
        start = time.perf_counter()
        results = run_suite(scenarios, workers=workers)
        walls[workers] = time.perf_counter() - start
        supported = sum(r.status == "supported" for r in results)
        print(f"workers={workers}: {walls[workers]:.1f} s wall, {supported}/{len(results)} "
              f"supported (target <= {TARGET_S:.0f} s)")
        slow = sorted(results, key=lambda r: r.wall_s, reverse=True)[:5]
        print("  slowest: " + ", ".join(f"{r.id} {r.wall_s:.1f} s" for r in slow))
    if 1 in walls and len(walls) > 1:
        for workers, wall in walls.items():
            if workers != 1:
                print(f"speed-up with {workers} workers: {walls[1] / wall:.2f}x")


if __name__ == "__main__":
    main()
