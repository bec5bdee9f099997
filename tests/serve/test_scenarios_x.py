"""SCENARIOS.md X1, X3, X13, X14, X16 and I5.3 (production serving techniques: MoE expert and
attention data parallelism, MLA, cross-vendor, FP8/FP4/INT4 quantisation), each checked
against a relation derivable by hand, not only "runs"."""

import pytest

from perfcast.errors import InputError
from perfcast.ops import Batch, kv_bytes_per_token, step_ops, weight_bytes_per_gpu
from perfcast.serve import ServeConfig, make_workload, plan_memory, simulate, step_model_for
from perfcast.specs import ParallelPlan, Precision, get_device, get_model

V1 = {"scheduler": "vllm-v1", "max_batch_tokens": 8192}


def _decode_s(model, contexts: int, batch: int) -> float:
    return float(model.step_time_s(decode_context=(contexts,) * batch))


def _closed_loop(config: ServeConfig, concurrency: int, isl: int, osl: int, model) -> dict:
    w = make_workload(2 * concurrency, arrival="closed_loop", concurrency=concurrency,
                      lengths="fixed", prompt_tokens=isl, output_tokens=osl, max_tokens=None)
    return simulate(config, w, step_model=model).summary()


# -- X1: Mixtral-8x7B on 8xH100, EP8 vs TP8 -------------------------------------------------
@pytest.fixture(scope="module")
def mixtral():
    tp8 = ServeConfig(model="mixtral-8x7b", gpu="h100-sxm", tp=8, **V1)
    ep8 = ServeConfig(model="mixtral-8x7b", gpu="h100-sxm", tp=8, ep=8, **V1)
    return {"tp8": (tp8, step_model_for(tp8)), "ep8": (ep8, step_model_for(ep8))}


def test_x1_ep8_and_tp8_hold_the_same_expert_bytes(mixtral):
    """8 experts over 8 GPUs: one whole expert (EP8) or an eighth of each (TP8) per GPU."""
    (tp8, _), (ep8, _) = mixtral["tp8"], mixtral["ep8"]
    assert plan_memory(ep8).weights_bytes == pytest.approx(plan_memory(tp8).weights_bytes)


def test_x1_ep8_decode_reads_more_expert_bytes_at_batch_1(mixtral):
    """Batch 1, top-2: TP8 reads 2 hit experts x 1/8 slice; the EP8 rank holding a hit expert
    reads all of it: 4x the expert weight bytes, so EP8's TPOT is higher at low batch."""
    m = get_model("mixtral-8x7b")

    def expert_bytes(plan):
        ops = step_ops(m, Batch.decode(1, 512), Precision(), plan)
        rows = ops[ops["op"].str.startswith("expert_") & (ops["family"] == "gemm")]
        return float((rows["bytes_read"] * rows["count"]).sum())

    ratio = expert_bytes(ParallelPlan(tp=8, ep=8)) / expert_bytes(ParallelPlan(tp=8))
    assert ratio == pytest.approx(4.0, rel=0.02)
    assert _decode_s(mixtral["ep8"][1], 512, 1) > _decode_s(mixtral["tp8"][1], 512, 1)


def test_x1_expert_skew_scales_the_heaviest_rank_rows():
    """Prefill of 4096 tokens: the most loaded EP rank computes skew x T x top-k / ep rows."""
    m = get_model("mixtral-8x7b")
    for skew in (1.0, 1.3, 2.0):
        ops = step_ops(m, Batch.prefill(1, 4096), Precision(),
                       ParallelPlan(tp=8, ep=8, expert_skew=skew))
        up = ops[ops["op"] == "expert_up_proj"].iloc[0]
        assert up["b"] * up["m"] == pytest.approx(skew * 4096 * 2 / 8)


def test_x1_serving_metrics(mixtral):
    out = {k: _closed_loop(c, 16, 512, 64, sm) for k, (c, sm) in mixtral.items()}
    for s in out.values():
        assert 0 < s["ttft_s"]["mean"] < 1.0 and 0.002 < s["tpot_s"]["mean"] < 0.05
        # closed loop, decode-dominated: throughput ~ concurrency / (TPOT + TTFT/osl)
        bound = 16 / s["tpot_s"]["mean"]
        assert 0.5 * bound < s["throughput_tok_s"] <= 1.05 * bound
    assert out["ep8"]["tpot_s"]["mean"] >= 0.95 * out["tp8"]["tpot_s"]["mean"]


# -- X14: DeepSeek-V3 (MLA + MoE) decode on 8xH200, EP8 with attention DP8 --------------------
@pytest.fixture(scope="module")
def deepseek():
    c = ServeConfig(model="deepseek-v3", gpu="h200-sxm", tp=1, ep=8, attention_dp=8,
                    replicas=8, precision="fp8", **V1)
    return c, step_model_for(c)


def test_x14_mla_kv_per_token_vs_gqa():
    """MLA caches one latent (512) + rope key (64) per layer: 61 x 576 B at FP8, ~4.7x
    smaller than Llama-3-70B's GQA cache (80 layers x 2 x 8 heads x 128, TP1)."""
    fp8 = Precision.uniform("fp8")
    mla = kv_bytes_per_token(get_model("deepseek-v3"), fp8, ParallelPlan())
    gqa = kv_bytes_per_token(get_model("llama-3-70b"), fp8, ParallelPlan())
    assert mla == 61 * 576 and gqa == 80 * 2 * 8 * 128
    assert gqa / mla == pytest.approx(4.66, rel=0.01)


def test_x14_attention_dp_layout(deepseek):
    """8 ranks, each its own requests and KV: experts split 8 ways, attention replicated."""
    c, _ = deepseek
    assert c.plan.moe_tp == 1 and c.plan.moe_token_ranks == 8 and c.cluster_spec.num_gpus == 8
    m = get_model("deepseek-v3")
    w = weight_bytes_per_gpu(m, c.precision, c.plan)
    experts = m.num_moe_layers * m.moe.num_experts * m.ffn_params(2048) * 1  # fp8
    assert w > experts / 8 and w < experts / 8 + 0.1 * m.total_params()
    assert plan_memory(c).bytes_per_block == 16 * 61 * 576


def test_x14_decode_tpot_and_throughput(deepseek):
    """Decode-dominated closed loop (isl 256, osl 128), 256 requests in flight over 8 ranks:
    each rank's step carries the EP group's 256 tokens in its MoE layers."""
    c, sm = deepseek
    one, full = _decode_s(sm, 1024, 1), _decode_s(sm, 1024, 32)
    assert one < full < 32 * one  # the batch shares the expert weight reads
    s = _closed_loop(c, 256, 256, 128, sm)
    tpot = s["tpot_s"]["mean"]
    assert 0.01 < tpot < 0.2
    assert s["throughput_tok_s"] <= 1.05 * 256 / tpot


def test_x14_all_to_all_over_the_ep_group(deepseek):
    c, _ = deepseek
    ops = step_ops(c.model_spec, Batch.decode(32, 1024), c.precision, c.plan)
    a2a = ops[ops["family"] == "alltoall"]
    assert set(a2a["op"]) == {"moe_dispatch", "moe_combine"} and set(a2a["n"]) == {8}
    # each rank sends its 32 tokens' top-8 copies of the 7168-wide hidden state (FP8)
    assert a2a[a2a["op"] == "moe_dispatch"]["m"].iloc[0] == 32 * 8 * 7168
    assert "mlp_allreduce" not in set(ops[ops["layer"] == "moe_layer"]["op"])


# -- X16: Llama-3-70B on one MI300X -----------------------------------------------------------
def test_x16_llama3_70b_fits_one_mi300x_not_one_h100():
    """141 GB of BF16 weights: below 192 GB x 0.9, above 80 GB."""
    c = ServeConfig(model="llama-3-70b", gpu="mi300x", **V1)
    mem = plan_memory(c)
    assert mem.weights_bytes == pytest.approx(141e9, rel=0.01) and mem.blocks > 1000
    with pytest.raises(InputError) as e:
        plan_memory(ServeConfig(model="llama-3-70b", gpu="h100-sxm", **V1))
    assert e.value.field == "gpu_memory_utilization"
    sm = step_model_for(c)
    floor = mem.weights_bytes / get_device("mi300x").hbm_bandwidth_bps
    assert floor < _decode_s(sm, 1024, 1) < 3 * floor  # decode reads every weight once
    s = _closed_loop(c, 8, 1024, 64, sm)
    assert s["ttft_s"]["mean"] > float(sm.step_time_s(prefill_tokens=(1024,),
                                                       prefill_context=(0,)))
    assert s["tpot_s"]["mean"] > floor and s["throughput_tok_s"] > 0


# -- X3: Llama-3-70B FP8 weights + KV vs BF16 on 4xH100 ---------------------------------------
def test_x3_fp8_more_kv_blocks_and_lower_tpot():
    """FP8 halves the weights (more room) and the bytes per block: > 2x the blocks."""
    cfg = {p: ServeConfig(model="llama-3-70b", gpu="h100-sxm", tp=4, precision=p, **V1)
           for p in ("bf16", "fp8")}
    mem = {p: plan_memory(c) for p, c in cfg.items()}
    assert mem["fp8"].bytes_per_block == mem["bf16"].bytes_per_block / 2
    assert mem["fp8"].weights_bytes == pytest.approx(mem["bf16"].weights_bytes / 2, rel=0.01)
    assert mem["fp8"].blocks > 2 * mem["bf16"].blocks
    sms = {p: step_model_for(c) for p, c in cfg.items()}
    for batch in (1, 64):
        assert _decode_s(sms["fp8"], 2048, batch) < _decode_s(sms["bf16"], 2048, batch)


# -- X13: Llama-3-70B FP4 on B200 -------------------------------------------------------------
def test_x13_fp4_on_b200():
    """FP4 layers: 0.5 B per weight; decode at batch 1 reads them once (HBM floor)."""
    c = ServeConfig(model="llama-3-70b", gpu="b200-sxm", precision="fp4", **V1)
    fp8 = ServeConfig(model="llama-3-70b", gpu="b200-sxm", precision="fp8", **V1)
    mem = plan_memory(c)
    assert mem.weights_bytes < 0.55 * plan_memory(fp8).weights_bytes
    sm, sm8 = step_model_for(c), step_model_for(fp8)
    floor = mem.weights_bytes / get_device("b200-sxm").hbm_bandwidth_bps
    assert floor < _decode_s(sm, 1024, 1) < _decode_s(sm8, 1024, 1)
    s = _closed_loop(c, 16, 1024, 64, sm)
    assert 0 < s["ttft_s"]["mean"] < 2.0 and floor < s["tpot_s"]["mean"] < 0.1
    assert s["throughput_tok_s"] <= 1.05 * 16 / s["tpot_s"]["mean"]


# -- I5.3: Llama-2-70B W4A16 vs FP16, TP2 on H100 ---------------------------------------------
def test_i5_3_int4_weight_only_decode_vs_prefill():
    """INT4 weights are 1/4 of FP16's bytes: decode (weight-read bound) about halves; a
    4096-token prefill is compute-bound, where dequantising the weights costs time."""
    fp16 = Precision(weights="fp16", activations="fp16")
    w4 = Precision(weights="int4", activations="fp16")
    cfg = {k: ServeConfig(model="llama-2-70b", gpu="h100-sxm", tp=2, precision=p, **V1)
           for k, p in (("fp16", fp16), ("w4a16", w4))}
    m, plan = get_model("llama-2-70b"), ParallelPlan(tp=2)
    edge = (m.embedding_params() + m.lm_head_params()) / 2 * 2
    body = {k: weight_bytes_per_gpu(m, p, plan) - edge for k, p in (("fp16", fp16),
                                                                     ("w4a16", w4))}
    assert body["w4a16"] == pytest.approx(body["fp16"] / 4)
    sms = {k: step_model_for(c) for k, c in cfg.items()}
    one = _decode_s(sms["w4a16"], 1024, 1) / _decode_s(sms["fp16"], 1024, 1)
    big = _decode_s(sms["w4a16"], 1024, 256) / _decode_s(sms["fp16"], 1024, 256)
    assert one < 0.6 and one < big  # the saving shrinks as the batch grows
    pre = {k: float(s.step_time_s(prefill_tokens=(4096,), prefill_context=(0,)))
           for k, s in sms.items()}
    assert pre["w4a16"] > pre["fp16"]  # dequantisation on the compute-bound path
    kv = {k: plan_memory(c) for k, c in cfg.items()}  # every weight byte saved holds KV
    assert kv["w4a16"].kv_bytes - kv["fp16"].kv_bytes == pytest.approx(
        body["fp16"] - body["w4a16"], rel=1e-9)
    assert kv["w4a16"].blocks > 5 * kv["fp16"].blocks


# -- ServeConfig validation of the MoE fields -------------------------------------------------
@pytest.mark.parametrize(("kw", "field"), [
    ({"model": "llama-3-70b", "tp": 8, "ep": 8}, "ep"),
    ({"model": "mixtral-8x7b", "tp": 2, "ep": 8}, "ep"),
    ({"model": "mixtral-8x7b", "tp": 1, "attention_dp": 4}, "attention_dp"),
    ({"model": "mixtral-8x7b", "tp": 1, "ep": 4, "attention_dp": 4}, "replicas"),
    ({"model": "mixtral-8x7b", "tp": 8, "ep": 8, "expert_skew": 0.5}, "expert_skew"),
])
def test_bad_moe_layouts_name_the_field(kw, field):
    with pytest.raises(InputError) as e:
        ServeConfig(gpu="h100-sxm", **kw)
    assert e.value.field == field
