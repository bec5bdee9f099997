"""Op tables of hybrid models: each layer kind priced as itself (windowed attention clipped,
recurrent layers context-free, sparse layers' indexer over every key), the serving step
model equal to direct pricing for them, and recurrent states in the memory plan."""

import numpy as np
import pytest

from perfcast.compose import ServingStepModel, host_overhead_s, step_time
from perfcast.kernels import RooflineModel
from perfcast.ops import Batch, kv_bytes_per_token, state_bytes_per_sequence, step_ops
from perfcast.specs import ModelSpec, ParallelPlan, Precision, cluster_for, get_device, get_model

BASE = {"model_type": "llama", "hidden_size": 1024, "num_hidden_layers": 8,
        "num_attention_heads": 16, "num_key_value_heads": 4, "intermediate_size": 2048,
        "vocab_size": 32000, "hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 1e4}
GPT_OSS_LIKE = {**BASE, "model_type": "gpt_oss", "sliding_window": 128,
                "layer_types": ["sliding_attention", "full_attention"] * 4,
                "num_local_experts": 8, "num_experts_per_tok": 2}
NEXT_LIKE = {**BASE, "model_type": "qwen3_next", "full_attention_interval": 4,
             "linear_num_key_heads": 8, "linear_key_head_dim": 64,
             "linear_num_value_heads": 16, "linear_value_head_dim": 64}
DSA_LIKE = {**BASE, "model_type": "deepseek_v32", "index_topk": 256, "index_n_heads": 8,
            "index_head_dim": 64}


def model(config):
    return ModelSpec.from_hf_config(config, config["model_type"])


def attn_flops(m, ctx):
    ops = step_ops(m, Batch(decode_context=(ctx,) * 4))
    return ops.loc[ops["family"] == "attn_decode"].eval("flops * count").sum()


def test_sliding_layers_stop_growing_past_the_window():
    m = model(GPT_OSS_LIKE)
    full = model({**GPT_OSS_LIKE, "layer_types": ["full_attention"] * 8})
    grow_mixed = attn_flops(m, 8000) - attn_flops(m, 4000)
    grow_full = attn_flops(full, 8000) - attn_flops(full, 4000)
    assert grow_mixed == pytest.approx(grow_full / 2)  # only the 4 full layers grow
    assert set(step_ops(m, Batch(decode_context=(10,)))["layer"]) >= {
        "moe_layer", "sliding_moe_layer"}


def test_recurrent_layers_cost_the_same_at_any_context():
    m = model(NEXT_LIKE)
    short, long = (step_ops(m, Batch(decode_context=(c,) * 8)) for c in (100, 50000))
    lin = [o.loc[o["family"] == "linear_attn"].eval("bytes_read * count").sum()
           for o in (short, long)]
    assert lin[0] == lin[1] > 0
    att = [attn_flops(m, c) for c in (100, 50000)]
    assert att[1] > att[0]


def test_sparse_layers_clip_attention_but_index_every_key():
    m = model(DSA_LIKE)
    ops = step_ops(m, Batch(decode_context=(10000,)))
    core = ops.loc[(ops["family"] == "attn_decode") & (ops["op"] == "attn")]
    indexer = ops.loc[ops["op"] == "indexer"]
    assert float(core["n"].iloc[0]) == 256 and float(indexer["n"].iloc[0]) == 10000


@pytest.mark.parametrize("config", [GPT_OSS_LIKE, NEXT_LIKE, DSA_LIKE],
                         ids=["mixed-window", "gated-deltanet", "dsa"])
def test_serving_step_model_equals_direct_pricing(config):
    m = model(config)
    box = cluster_for(get_device("h100-sxm"), 1)
    sm = ServingStepModel(m, box, time_model=RooflineModel())
    rng = np.random.default_rng(0)
    for _ in range(12):
        pt = tuple(int(x) for x in rng.integers(1, 1500, rng.integers(0, 3)))
        pc = tuple(int(x) for x in rng.integers(0, 6000, len(pt)))
        ctx = int(rng.integers(1, 9000))
        dc = (ctx,) * int(rng.integers(0 if pt else 1, 40))
        batch = Batch(prefill_tokens=pt, prefill_context=pc, decode_context=dc)
        direct = step_time(step_ops(m, batch), box, sm.execution,
                           host_overhead_s("vllm-v0", batch.num_seqs, 1), sm.time_model).time_s
        assert sm.step_time_s(pt, pc, dc) == pytest.approx(direct, rel=0.03), batch


def test_recurrent_state_is_per_sequence_and_kv_only_counts_attention_layers():
    m, prec = model(NEXT_LIKE), Precision()
    dense = model(BASE)
    assert kv_bytes_per_token(m, prec, ParallelPlan()) == pytest.approx(
        kv_bytes_per_token(dense, prec, ParallelPlan()) / 4)
    state = state_bytes_per_sequence(m, prec, ParallelPlan())
    assert state >= 6 * 4.0 * 16 * 64 * 64  # 6 linear layers of fp32 states
    assert state_bytes_per_sequence(m, prec, ParallelPlan(tp=2)) == pytest.approx(state / 2)
    assert state_bytes_per_sequence(dense, prec, ParallelPlan()) == 0


def test_paths_that_repeat_one_layer_refuse_hybrids():
    from perfcast.errors import InputError
    from perfcast.ops import eager_ops
    from perfcast.train import TrainJob

    m = model(NEXT_LIKE)
    with pytest.raises(InputError) as err:
        eager_ops(m, 1, 128)
    assert err.value.field == "model" and "linear/dense" in str(err.value)
    with pytest.raises(InputError) as err:
        TrainJob(model=m, cluster=cluster_for(get_device("h100-sxm"), 1), plan=ParallelPlan(),
                 global_batch=8,
                 micro_batch=1, seq_len=512)
    assert err.value.field == "model"


def test_experts_tp_split_across_dp_ranks_gather_their_tokens():
    """vLLM's DP without EP: tokens of the dp ranks are all-gathered, every rank runs a
    1/(tp x dp) slice of every expert on all of them, a reduce-scatter returns each rank's."""
    m = get_model("mixtral-8x7b")
    plan = ParallelPlan(tp=1, dp=4, expert_tp=4)
    ops = step_ops(m, Batch(prefill_tokens=(64,)), plan=plan)
    moe = ops[ops["layer"] == "moe_layer"]
    gather = moe[moe["op"] == "moe_gather"].iloc[0]
    assert (gather["family"], gather["n"]) == ("allgather", 4)
    assert set(moe["op"]) >= {"moe_reduce_scatter"} and "mlp_allreduce" not in set(moe["op"])
    up = moe[moe["op"] == "expert_up_proj"].iloc[0]
    assert up["n"] == 2 * m.moe.expert_intermediate_size / 4  # gated: gate + up, a quarter
    total_rows = up["m"] * up["b"]
    assert total_rows == pytest.approx(4 * 64 * m.moe.experts_per_token)  # gathered tokens
    with pytest.raises(ValueError):
        ParallelPlan(tp=2, dp=4, expert_tp=2)  # 2 x 1 shards cannot fill 8 ranks


def test_context_parallelism_refuses_layer_patterns():
    from perfcast.api import InferRequest, run
    from perfcast.errors import InputError

    options = {"gpu": "h100-sxm", "tp": 1, "cp": 2, "prompt_tokens": 4096, "output_tokens": 2}
    with pytest.raises(InputError) as err:
        run(InferRequest.from_options({**options, "model": "gpt-oss-20b"}))
    assert err.value.field == "cp" and "sliding" in str(err.value)
    assert run(InferRequest.from_options({**options, "model": "llama-3.1-8b"})).forecast.ttft_s
