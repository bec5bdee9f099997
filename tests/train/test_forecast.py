"""forecast_training: the breakdown adds up, inputs are checked, directions hold."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.comm import RingAlphaBeta
from perfcast.errors import InputError
from perfcast.specs import ParallelPlan, get_cluster, get_model
from perfcast.train import ITERATION_PARTS, TrainJob, forecast_training, sweep_plans

LLAMA = get_model("llama-2-7b")
BIG = get_cluster("dgx-h100", 64)


def _job(plan, **kw):
    base = {"model": LLAMA, "cluster": BIG, "plan": plan, "seq_len": 2048,
            "micro_batch": 1, "global_batch": 64}
    return TrainJob(**{**base, **kw})


def _parts(fc):
    return sum(fc.breakdown[k] for k in ITERATION_PARTS)


@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from([1, 2, 8]), pp=st.sampled_from([1, 2, 4]),
       cp=st.sampled_from([1, 2]), zero=st.integers(0, 3), sp=st.booleans(),
       schedule=st.sampled_from(["1f1b", "gpipe", "interleaved-1f1b"]),
       recompute=st.sampled_from(["none", "selective", "full"]))
def test_breakdown_sums_to_the_iteration(tp, pp, cp, zero, sp, schedule, recompute):
    zero = zero if pp == 1 else min(zero, 1)
    dp = 64 // (tp * pp * cp)
    v = 2 if schedule == "interleaved-1f1b" and pp > 1 else 1
    plan = ParallelPlan(tp=tp, pp=pp, cp=cp, dp=dp, sp=sp and tp > 1, zero_stage=zero,
                        schedule=schedule, virtual_stages=v)
    fc = forecast_training(_job(plan, global_batch=dp * 4 * pp, recompute=recompute))
    b = fc.breakdown
    assert _parts(fc) == pytest.approx(fc.iteration_time_s, rel=1e-9)
    exposed = sum(v for k, v in b.items() if k.startswith("exposed_comm."))
    assert exposed == pytest.approx(b["exposed_comm_s"], rel=1e-9, abs=1e-15)
    assert all(v >= 0 for v in b.values())
    assert b["recompute_s"] <= b["compute_s"] + 1e-12
    for kind, total in fc.comm.items():  # exposed never exceeds what a GPU sent...
        if kind != "pp_sendrecv":  # ...but sends chained across stages on the critical path
            assert b[f"exposed_comm.{kind}_s"] <= total + 1e-12  # can outlast one GPU's own
    assert fc.tokens_per_s == pytest.approx(dp * 4 * pp * 2048 / fc.iteration_time_s)
    peak = BIG.device.dense_peak_flops["bf16"]
    assert fc.mfu == pytest.approx(fc.model_flops / (fc.iteration_time_s * 64 * peak))


def test_same_job_same_answer():
    plan = ParallelPlan(tp=2, pp=2, dp=16, zero_stage=1)
    first = forecast_training(_job(plan, global_batch=64)).as_dict()
    second = forecast_training(_job(plan, global_batch=64)).as_dict()
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


@pytest.mark.parametrize("kw,field", [
    ({"plan": ParallelPlan(tp=3)}, "tp"),
    ({"plan": ParallelPlan(dp=128)}, "plan"),
    ({"global_batch": 65}, "global_batch"),
    ({"plan": ParallelPlan(dp=8, cp=2), "seq_len": 2050}, "seq_len"),
    ({"overlap": {"nccl_channels": -1}}, "overlap.nccl_channels"),
    ({"plan": ParallelPlan(ep=2)}, "ep"),
    ({"plan": ParallelPlan(dp=8, micro_batches=3)}, "plan.micro_batches"),
    ({"micro_batch": 0}, "micro_batch"),
    ({"recompute": "some"}, "recompute"),
    ({"lora_rank": 0}, "lora_rank"),
])
def test_bad_jobs_name_their_field(kw, field):
    with pytest.raises(InputError) as err:
        _job(**{"plan": ParallelPlan(dp=8), **kw})
    assert err.value.field == field


@settings(max_examples=15, deadline=None)
@given(small=st.sampled_from([2, 4, 8]), factor=st.sampled_from([2, 4, 8]),
       zero=st.integers(0, 3))
def test_more_data_parallelism_never_sends_less(small, factor, zero):
    """Same per-GPU work; a larger DP group moves at least as many bytes per GPU, over
    links no faster, so its gradient collectives take no less time."""
    def comm(dp):
        fc = forecast_training(_job(ParallelPlan(dp=dp, zero_stage=zero), global_batch=2 * dp,
                                    micro_batch=2))
        return fc.breakdown["comm_total_s"], fc.gradient_bytes

    (t_small, bytes_small), (t_big, bytes_big) = comm(small), comm(small * factor)
    assert t_big >= t_small - 1e-12
    assert bytes_big == pytest.approx(bytes_small)


def test_a_dp_group_across_nodes_uses_the_network():
    """TP8 x DP4: each DP group has one GPU per node, so its reduction crosses InfiniBand;
    on one 32-GPU NVSwitch domain it would not."""
    nodes = get_cluster("dgx-h100", 32)
    one_domain = nodes.model_copy(update={"gpus_per_node": 32, "num_nodes": 1})
    plan = ParallelPlan(tp=8, dp=4, zero_stage=1)
    job = _job(plan, cluster=nodes, global_batch=4)
    ring = RingAlphaBeta()
    across = forecast_training(job, comm_model=ring).comm["zero_reducescatter"]
    inside = forecast_training(job.model_copy(update={"cluster": one_domain}),
                               comm_model=ring).comm["zero_reducescatter"]
    assert across > 3 * inside


def test_sweep_rows_match_single_forecasts():
    table = sweep_plans(LLAMA, get_cluster("dgx-h100", 16), seq_len=2048, global_batch=32,
                        micro_batch_sizes=(1, 2), recompute=("none", "full"), max_plans=40)
    assert 0 < len(table) <= 40
    assert table["fits"].iloc[0] and not table["fits"].is_monotonic_increasing
    fitting = table[table["fits"]]["tokens_per_s"].to_numpy()
    assert np.all(np.diff(fitting) <= 0)
    for row in table.sample(5, random_state=0).itertuples():
        plan = ParallelPlan(tp=row.tp, pp=row.pp, dp=row.dp, cp=row.cp, sp=row.sp,
                            zero_stage=row.zero_stage, schedule=row.schedule,
                            virtual_stages=row.virtual_stages)
        job = TrainJob(model=LLAMA, cluster=get_cluster("dgx-h100", 16), plan=plan,
                       seq_len=2048, micro_batch=row.micro_batch, global_batch=32,
                       recompute=row.recompute)
        fc = forecast_training(job)
        assert fc.iteration_time_s == pytest.approx(row.iteration_time_s, rel=1e-9)
        assert fc.memory_per_gpu_bytes == pytest.approx(row.memory_per_gpu_bytes, rel=1e-9)
