"""Plans people run at scale (issue 21): hybrid sharding (HSDP), ZeRO/FSDP inside pipeline
stages, what hiding collectives under compute costs, and a communication-bound plan whose
iteration follows the bandwidth arithmetic."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.api import TrainRequest, run
from perfcast.errors import InputError
from perfcast.specs import Link, LinkKind, ParallelPlan, get_cluster, get_model
from perfcast.train import ITERATION_PARTS, CommOverlap, TrainJob, forecast_training

LLAMA = get_model("llama-2-7b")


def _job(plan, cluster=None, **kw):
    base = {"model": LLAMA, "cluster": cluster or get_cluster("dgx-h100", 64), "plan": plan,
            "seq_len": 2048, "micro_batch": 1, "global_batch": 2 * plan.dp * plan.pp}
    return TrainJob(**{**base, **kw})


def test_hsdp_over_every_rank_is_plain_zero3():
    plain = forecast_training(_job(ParallelPlan(dp=64, zero_stage=3)))
    hybrid = forecast_training(_job(ParallelPlan(dp=64, zero_stage=3, shard_group=64)))
    assert hybrid == plain


def test_hsdp_shards_states_within_the_group_and_all_reduces_across_replicas():
    full = forecast_training(_job(ParallelPlan(dp=64, zero_stage=3)))
    hsdp = forecast_training(_job(ParallelPlan(dp=64, zero_stage=3, shard_group=8)))
    for kind in ("weights", "gradients", "optimizer"):  # 1/8 of the states, not 1/64
        assert hsdp.memory[kind] == pytest.approx(8 * full.memory[kind], rel=1e-6)
    assert full.comm["dp_allreduce"] == 0 < hsdp.comm["dp_allreduce"]
    # the per-layer gathers stay inside one node: faster than across 8 nodes
    assert hsdp.comm["zero_allgather"] < full.comm["zero_allgather"]


@pytest.mark.parametrize("plan, field", [
    (dict(dp=64, shard_group=8), "shard_group"),
    (dict(dp=64, zero_stage=3, shard_group=6), "shard_group"),
])
def test_hsdp_refusals_name_the_field(plan, field):
    with pytest.raises(InputError) as err:
        run(TrainRequest.from_options(model="llama-2-7b", gpu="h100-sxm", num_gpus=64,
                                      **{"zero": 0, **{k.replace("zero_stage", "zero"): v
                                                       for k, v in plan.items()}}))
    assert err.value.field == field
    assert "shard_group" in str(err.value)


def test_fsdp_inside_pipeline_stages_where_the_stack_does_it():
    """torchtitan composes FSDP2 with PP; Megatron-Core shards only optimizer state there."""
    options = dict(model="llama-2-7b", gpu="h100-sxm", num_gpus=16, pp=2, zero=3,
                   global_batch=32)
    with pytest.raises(InputError) as err:
        run(TrainRequest.from_options(**options))
    assert err.value.field == "zero" and "--stack fsdp" in str(err.value.allowed)
    fc = run(TrainRequest.from_options(**options, stack="fsdp")).forecast
    assert fc.comm["zero_allgather"] > 0 and fc.comm["pp_sendrecv"] > 0
    zero1 = run(TrainRequest.from_options(**{**options, "zero": 1}, stack="fsdp")).forecast
    assert fc.memory["weights"] < zero1.memory["weights"]


@settings(max_examples=20, deadline=None)
@given(channels=st.integers(0, 64), loss=st.floats(0.0, 3.0), zero=st.sampled_from([0, 2, 3]),
       dp=st.sampled_from([8, 16, 64]))
def test_hidden_collectives_cost_contention_and_overlap_loss(channels, loss, zero, dp):
    plan = ParallelPlan(dp=dp, zero_stage=zero)
    ideal = forecast_training(_job(plan, overlap=CommOverlap(nccl_channels=0)))
    fc = forecast_training(_job(plan, overlap=CommOverlap(nccl_channels=channels,
                                                          overlap_loss=loss)))
    b = fc.breakdown
    share = min(channels / LLAMA_CLUSTER_SMS, 1.0)
    assert b["hidden_comm_s"] == pytest.approx(ideal.breakdown["hidden_comm_s"])
    assert b["contention_s"] == pytest.approx(share * b["hidden_comm_s"], abs=1e-15)
    assert b["overlap_loss_s"] == pytest.approx(loss * b["hidden_comm_s"], abs=1e-15)
    assert fc.iteration_time_s >= ideal.iteration_time_s
    assert sum(b[k] for k in ITERATION_PARTS) == pytest.approx(fc.iteration_time_s, rel=1e-9)


LLAMA_CLUSTER_SMS = get_cluster("dgx-h100", 8).device.sm_count


def _slow_fabric(nodes: int):
    """H100 nodes with one 10 Gb/s Ethernet adapter per node: a slow scale-out fabric."""
    nic = Link(kind=LinkKind.ETHERNET, bandwidth_bps=1.25e9, latency_s=10e-6, gpus_per_nic=8)
    return get_cluster("dgx-h100", 8 * nodes).model_copy(update={"inter_node": nic})


def test_zero3_over_a_slow_fabric_is_communication_bound_and_grows_with_nodes():
    """ZeRO-3 gathers every layer's parameters each forward and backward and
    reduce-scatters its gradients: across k nodes each node's adapter carries (k - 1) / k of
    every layer's bytes (hierarchical ring: Patarasuk & Yuan 2009), so the iteration is the
    bandwidth arithmetic and grows with the number of nodes, as measured ZeRO-3 runs do."""
    times = {}
    for nodes in (2, 4, 8, 16):
        gpus = 8 * nodes
        fc = forecast_training(_job(ParallelPlan(dp=gpus, zero_stage=3), _slow_fabric(nodes),
                                    global_batch=gpus))
        layer_bytes = LLAMA.layer_params(0) * 2  # bf16 gathers and gradients
        arithmetic = 3 * LLAMA.num_layers * layer_bytes * (nodes - 1) / nodes / 1.25e9
        exposed = fc.breakdown["exposed_comm_s"]
        assert exposed > 0.9 * fc.iteration_time_s  # communication-bound
        assert fc.iteration_time_s == pytest.approx(arithmetic, rel=0.15)
        times[nodes] = fc.iteration_time_s
    assert times[2] < times[4] < times[8] < times[16]
    assert times[16] / times[2] == pytest.approx((15 / 16) / (1 / 2), rel=0.1)


def test_tp_comm_overlap_hides_tp_collectives_behind_gemms_at_a_contention_cost():
    plan = ParallelPlan(tp=8, sp=True, dp=8)
    plain = forecast_training(_job(plan))
    overlapped = forecast_training(_job(plan, overlap=CommOverlap(tp_comm_overlap=True)))
    assert overlapped.comm["sp"] == pytest.approx(plain.comm["sp"])  # same bytes moved
    assert overlapped.breakdown["exposed_comm.sp_s"] < plain.breakdown["exposed_comm.sp_s"]
    assert overlapped.breakdown["contention_s"] > plain.breakdown["contention_s"]
    assert overlapped.iteration_time_s < plain.iteration_time_s
    with pytest.raises(InputError) as err:
        run(TrainRequest.from_options(model="llama-2-7b", gpu="h100-sxm", num_gpus=8,
                                      tp_comm_overlap=True))
    assert err.value.field == "tp_comm_overlap"


def test_the_plan_search_shards_inside_pipeline_stages_only_for_such_stacks():
    options = dict(model="llama-2-7b", gpu="h100-sxm", num_gpus=16, global_batch=64,
                   sweep=True)
    megatron = run(TrainRequest.from_options(**options)).plans
    fsdp = run(TrainRequest.from_options(**options, stack="fsdp")).plans
    deep = (megatron["pp"] > 1) & (megatron["zero_stage"] > 1)
    assert not deep.any()
    assert ((fsdp["pp"] > 1) & (fsdp["zero_stage"] > 1)).any()


def test_all_to_all_context_parallelism_exposes_four_all_to_alls_per_pass():
    """DeepSpeed-Ulysses: q, k, v and the output cross the cp ranks by all-to-all, on the
    critical path; the same compute as ring CP, communication that does not grow with the
    ring's cp - 1 hops."""
    model = get_model("llama-3-8b")
    cluster = get_cluster("dgx-h100", 16)

    def fc(algorithm, recompute="none"):
        plan = ParallelPlan(tp=2, cp=8, cp_algorithm=algorithm)
        return forecast_training(TrainJob(model=model, cluster=cluster, plan=plan,
                                          seq_len=65536, micro_batch=1, global_batch=1,
                                          recompute=recompute))

    ring, a2a = fc("ring"), fc("all-to-all")
    assert a2a.breakdown["compute_s"] == pytest.approx(ring.breakdown["compute_s"])
    assert a2a.breakdown["exposed_comm.cp_s"] == pytest.approx(a2a.comm["cp"])
    assert a2a.comm["cp"] > 0
    assert a2a.comm["cp"] < ring.comm["cp"]
    full = fc("all-to-all", "full")  # full recomputation re-runs the forward's all-to-alls
    assert full.comm["cp"] == pytest.approx(1.5 * a2a.comm["cp"])


@pytest.mark.parametrize("options, field", [
    ({"cp": 1, "cp_algorithm": "all-to-all"}, "cp_algorithm"),
    ({"cp": 2, "cp_algorithm": "ulysses"}, "cp_algorithm"),
    ({"cp": 8, "tp": 8, "num_gpus": 64, "cp_algorithm": "all-to-all"}, "cp"),  # 32 heads
])
def test_all_to_all_cp_refusals_name_the_field(options, field):
    with pytest.raises(InputError) as err:
        run(TrainRequest.from_options(**{"model": "llama-2-7b", "gpu": "h100-sxm",
                                         "num_gpus": 2, **options}))
    assert err.value.field == field


def test_inference_refuses_all_to_all_context_parallelism():
    from perfcast.compose import forecast_inference

    plan = ParallelPlan(tp=1, cp=2, cp_algorithm="all-to-all")
    with pytest.raises(InputError) as err:
        forecast_inference(get_model("llama-3-8b"), get_cluster("dgx-h100", 8), plan=plan,
                           prompt_tokens=4096, output_tokens=1)
    assert err.value.field == "cp_algorithm"


def test_overlap_param_gather_hides_zero1_all_gather_but_its_first_bucket():
    plan = ParallelPlan(tp=8, pp=4, dp=2, zero_stage=1)
    plain = forecast_training(_job(plan))
    hidden = forecast_training(_job(plan, overlap=CommOverlap(param_gather_overlap=True)))
    assert hidden.comm["zero_allgather"] == pytest.approx(plain.comm["zero_allgather"])
    assert plain.comm["zero_allgather"] > 0
    exposed = hidden.breakdown["exposed_comm.zero_allgather_s"]
    assert 0 < exposed < plain.breakdown["exposed_comm.zero_allgather_s"]
    assert hidden.breakdown["contention_s"] > plain.breakdown["contention_s"]
    assert sum(hidden.breakdown[k] for k in ITERATION_PARTS) == pytest.approx(
        hidden.iteration_time_s, rel=1e-9)
    with pytest.raises(InputError) as err:
        run(TrainRequest.from_options(model="gpt2", gpu="h100-sxm", overlap_param_gather=True))
    assert err.value.field == "overlap_param_gather"


@pytest.mark.parametrize("option", ["tp_comm_overlap", "overlap_param_gather"])
def test_rlhf_refuses_overlap_options_it_would_not_use(option):
    with pytest.raises(InputError) as err:
        run(TrainRequest.from_options(model="llama-3-8b", gpu="h100-sxm", num_gpus=8, tp=2,
                                      zero=1, rlhf=True, global_batch=64, **{option: True}))
    assert err.value.field == option
