"""Training iterations are composed from compose's steps: one micro-batch of a job is
`compose.training_step` (the same op table, priced by `compose.step_time`), and train adds the
schedule, the collectives in their groups, the optimizer and memory on top."""

import pytest

from perfcast.comm import default_collective_model
from perfcast.compose import training_step
from perfcast.specs import ParallelPlan, cluster_for, get_device, get_model
from perfcast.train import TrainJob, default_time_model, forecast_training, training_precision

LLAMA = get_model("llama-2-7b")
BOX = cluster_for(get_device("h100-sxm"), 8)
BF16 = training_precision("bf16")


@pytest.mark.parametrize("tp", [1, 8])
def test_one_micro_batch_is_the_composed_step(tp):
    """One TP group, one micro-batch: train's compute is the step's kernels, its exposed TP
    communication the step's collectives, and the iteration adds only the optimizer."""
    plan = ParallelPlan(tp=tp)
    step = training_step(LLAMA, 1, 2048, BOX, BF16, plan, time_model=default_time_model(),
                         comm_model=default_collective_model())
    job = TrainJob(model=LLAMA, cluster=BOX, plan=plan, seq_len=2048, micro_batch=1,
                   global_batch=1, precision=BF16)
    b = forecast_training(job).breakdown
    assert b["compute_s"] == pytest.approx(step.kernel_s, rel=1e-12)
    assert b["exposed_comm.tp_s"] == pytest.approx(step.comm_s, rel=1e-12, abs=1e-15)
    assert b["bubble_s"] == 0
    expected = step.time_s + b["optimizer_s"]
    assert forecast_training(job).iteration_time_s == pytest.approx(expected, rel=1e-12)


def test_micro_batches_repeat_the_step():
    """Gradient accumulation: m micro-batches run the composed step m times."""
    plan = ParallelPlan()
    step = training_step(LLAMA, 2, 1024, BOX, BF16, plan, time_model=default_time_model())
    job = TrainJob(model=LLAMA, cluster=BOX, plan=plan, seq_len=1024, micro_batch=2,
                   global_batch=8, precision=BF16)
    assert forecast_training(job).breakdown["compute_s"] == pytest.approx(4 * step.kernel_s,
                                                                          rel=1e-12)
