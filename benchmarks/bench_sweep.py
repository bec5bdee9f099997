"""Throughput of `perfcast sweep`: points per second for an infer sweep in this process
against the local process pool. Run: `python benchmarks/bench_sweep.py [--points 200]
[--workers N]` (not part of `pytest`).

The grid is Llama-2-7B `perfcast infer` over GPU x batch x prompt length x output length
(200 points by default). Each run writes to a fresh temporary directory, so no point is
reused; the two runs' results must be identical. Prints wall seconds, points/s and the
pool's speed-up over one process (the pool's workers pay their start and imports inside it).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import pandas as pd

from perfcast.cli._sweep import run_point
from perfcast.sweep import expand_grid, run_sweep

GRID = {
    "gpu": ["a100-sxm4-80gb", "h100-sxm", "l40s", "a10", "h200-sxm"],
    "batch": [1, 2, 4, 8, 16],
    "prompt_tokens": [128, 512, 1024, 2048],
    "output_tokens": [64, 256],
}


def points(count: int) -> list[dict]:
    grid = expand_grid({"command": "infer", "model": "llama-2-7b"}, GRID)
    return grid[:count]


def timed_sweep(batch: list[dict], workers: int, root: Path) -> tuple[pd.DataFrame, float]:
    start = time.perf_counter()
    frame = run_sweep(batch, run_point, root / f"w{workers}", workers=workers)
    return frame, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=200)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    args = parser.parse_args()
    batch = points(args.points)
    with tempfile.TemporaryDirectory() as tmp:
        serial, serial_s = timed_sweep(batch, 1, Path(tmp))
        pooled, pooled_s = timed_sweep(batch, args.workers, Path(tmp))
    pd.testing.assert_frame_equal(serial, pooled)
    ok = int((serial.status == "ok").sum())
    print(f"{len(batch)} infer points ({ok} ok), {os.cpu_count()} CPUs")
    print(f"in process:          {serial_s:7.1f} s  {len(batch) / serial_s:6.2f} points/s")
    print(f"pool of {args.workers:2d} workers:  {pooled_s:7.1f} s  "
          f"{len(batch) / pooled_s:6.2f} points/s")
    print(f"speed-up: {serial_s / pooled_s:.2f}x (results identical)")


if __name__ == "__main__":
    main()
