"""Speed of the training forecast. Run: `python benchmarks/bench_train.py` (not part of
`pytest`). Targets (perfcast issue 7): one 16,384-GPU Llama-3.1-405B forecast (scenario X8)
in under a second, and 10^4 parallel plans of one model swept in under a minute, on one core.

Prints wall and CPU seconds of: X8 cold (first forecast in the process: loads the shipped
calibration, prices the layer shape, simulates the schedule), X8 warm (layer prices memoised),
and `sweep_plans` over 10,000 plans of Llama-2-70B on 1,024 H100s (cold).
"""

from __future__ import annotations

import time

from perfcast.specs import ParallelPlan, get_cluster, get_model
from perfcast.train import TrainJob, forecast_training, sweep_plans


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def x8_job() -> TrainJob:
    return TrainJob(model=get_model("llama-3.1-405b"), cluster=get_cluster("dgx-h100", 16384),
                    plan=ParallelPlan(tp=8, cp=2, pp=16, dp=64, sp=True, zero_stage=1,
                                      schedule="interleaved-1f1b", virtual_stages=4),
                    seq_len=8192, micro_batch=1, global_batch=2048)


def main() -> None:
    job = x8_job()
    fc, wall, cpu = _timed(lambda: forecast_training(job))
    print(f"X8 cold: {wall:.3f} s wall, {cpu:.3f} s CPU (MFU {fc.mfu:.3f}, "
          f"{fc.tokens_per_s:,.0f} tokens/s)")
    _, wall, cpu = _timed(lambda: forecast_training(job))
    print(f"X8 warm: {wall:.4f} s wall, {cpu:.4f} s CPU")
    table, wall, cpu = _timed(lambda: sweep_plans(
        get_model("llama-2-70b"), get_cluster("dgx-h100", 1024), seq_len=4096,
        global_batch=1024, max_plans=10_000))
    print(f"sweep of {len(table):,} plans: {wall:.2f} s wall, {cpu:.2f} s CPU "
          f"({int(table['fits'].sum()):,} fit; best {table['tokens_per_s'].iloc[0]:,.0f} "
          "tokens/s)")


if __name__ == "__main__":
    main()
