"""Deployments a user writes for `serve` (issue 20): per-pool layouts of disaggregated
serving (workers, TP/PP/EP/attention-DP, MoE-TP, batch limits), wide EP, `--max-model-len`
(default from the model's config, never a silent clip), expert TP, quantisation schemes and
TP over attention heads as the engines split them. Old flags and request files still work."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from perfcast.api import ServeRequest, dump_request, load_request, resolve, run
from perfcast.api._serve import PoolLayout
from perfcast.cli import app
from perfcast.errors import InputError
from perfcast.serve import ServeConfig
from perfcast.specs import get_model

runner = CliRunner()
SMALL = {"qps": 2.0, "num_requests": 12}


def _refused(**options) -> InputError:
    with pytest.raises(InputError) as err:
        run(ServeRequest.from_options({**SMALL, **options}))
    return err.value


# -- pool layouts ---------------------------------------------------------------------------
@pytest.mark.parametrize("text, fields", [
    ("2x4", {"workers": 2, "tp": 4}),
    ("2x(tp8,ep8,dp8,batch256)", {"workers": 2, "tp": 8, "ep": 8, "attention_dp": 8,
                                  "max_batch": 256}),
    ("1x(tp=1, dp=32, ep=32)", {"tp": 1, "attention_dp": 32, "ep": 32}),
    ("(tp4,pp2,tokens8192)", {"tp": 4, "pp": 2, "max_batch_tokens": 8192}),
    ("3x(tp8,moe_tp2,ep4,max_batch64)", {"workers": 3, "tp": 8, "moe_tp": 2, "ep": 4,
                                          "max_batch": 64}),
])
def test_a_pool_is_written_compactly_and_reads_back(text, fields):
    layout = PoolLayout.parse(text, "disagg_prefill")
    assert layout == PoolLayout(**fields)
    assert PoolLayout.parse(str(layout), "disagg_prefill") == layout
    assert PoolLayout.parse(layout.model_dump(), "disagg_prefill") == layout


@pytest.mark.parametrize("text, words", [
    ("2", "is not one of"), ("2x(tp8,xx4)", "'xx4'"), ("2x(tp8,tp4)", "given twice"),
    ("1x(tp4,ep3)", "must divide"), ("1x(tp8,ep4,moe_tp4)", "must equal"),
    ("0x4", "greater than or equal to 1"),
])
def test_a_bad_pool_is_refused_naming_its_option(text, words):
    err = _refused(disagg_prefill=text, disagg_decode="1x1")
    assert err.field == "disagg_prefill" and words in err.problem


def test_pools_deploy_their_own_layout_and_batch_limits():
    request = ServeRequest.from_options(
        SMALL, model="mixtral-8x7b", gpu="h100-sxm", max_batch=64, scheduler="vllm-v1",
        disagg_prefill="2x(tp2,batch8)", disagg_decode="1x(tp1,dp4,ep4,tokens4096)")
    prefill, decode = resolve(request).configs
    assert (prefill.replicas, prefill.tp, prefill.max_batch) == (2, 2, 8)
    assert (decode.replicas, decode.attention_dp, decode.ep) == (4, 4, 4)
    assert (decode.max_batch, decode.max_batch_tokens, decode.plan.moe_tp) == (64, 4096, 1)


def test_a_disaggregated_run_reports_its_pools_and_runs_a_closed_loop():
    result = run(ServeRequest.from_options(
        concurrency=4, num_requests=12, scheduler="vllm-v1",
        disagg_prefill="1x(tp1,batch4)", disagg_decode="2x1"))
    assert result.mode == "disaggregated" and len(result.requests) == 12
    assert result.inputs["disagg_prefill"] == "1x(batch4)"
    assert result.inputs["disagg_decode"] == "2x1" and result.inputs["decode_gpus"] == 2


def test_wide_ep_over_an_nvl72_domain_is_expressible():
    """Decode at attention TP 1 x 32 attention-DP ranks x EP 32 on GB200 (one NVL72
    domain): 32 replicas sharing one EP group."""
    request = ServeRequest.from_options(
        model="deepseek-v3", cluster="gb200-nvl72", dtype="fp8", concurrency=64,
        num_requests=64, scheduler="vllm-v1",
        disagg_prefill="2x(tp8,ep8)", disagg_decode="1x(tp1,dp32,ep32,batch64)")
    prefill, decode = resolve(request).configs
    assert (decode.replicas, decode.ep, decode.plan.moe_tp) == (32, 32, 1)
    assert decode.cluster_spec.num_gpus >= 32 and prefill.tp == 8


def test_one_aggregated_worker_with_attention_dp_needs_no_replicas():
    request = ServeRequest.from_options(SMALL, model="mixtral-8x7b", gpu="h100-sxm",
                                        attention_dp=4, ep=4)
    assert resolve(request).config.replicas == 4
    assert _refused(model="mixtral-8x7b", gpu="h100-sxm", attention_dp=4, ep=4,
                    replicas=2).field == "replicas"


@pytest.mark.parametrize("option, value", [("ep", 2), ("attention_dp", 2), ("moe_tp", 1),
                                           ("pp", 2), ("replicas", 2), ("tp", 2)])
def test_deployment_options_beside_pools_are_refused(option, value):
    err = _refused(disagg_prefill="1x1", disagg_decode="1x1", **{option: value})
    assert err.field == option and "each pool gives its own" in err.problem


# -- old flags and request files -------------------------------------------------------------
def test_old_request_files_and_flags_still_load():
    flat = load_request({"command": "serve", "qps": 1.0, "disagg_prefill": "1x1",
                         "disagg_decode": "2x4"})
    nested = load_request({"command": "serve", "workload": {"qps": 1.0}, "disaggregation": {
        "disagg_prefill": "1x1", "disagg_decode": "2x4"}})
    assert flat == nested
    assert nested.disaggregation.disagg_decode == PoolLayout(workers=2, tp=4)
    res = runner.invoke(app, ["serve", "--qps", "2", "--num-requests", "8", "--json",
                              "--disagg-prefill", "1x1", "--disagg-decode", "1x1"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["inputs"]["disagg_prefill"] == "1x1"


def test_new_layouts_survive_a_request_file():
    request = ServeRequest.from_options(SMALL, disagg_prefill="2x(tp2,ep2,batch8)",
                                        disagg_decode="1x(tp1,dp8,ep8)")
    data = json.loads(json.dumps(dump_request(request)))
    assert data["disaggregation"]["disagg_decode"] == {"ep": 8, "attention_dp": 8}
    assert load_request(data) == request


# -- max model length --------------------------------------------------------------------------
def test_max_model_len_defaults_to_the_models_context():
    result = run(ServeRequest.from_options(SMALL))
    assert result.inputs["max_model_len"] == get_model("llama-2-7b").max_position_embeddings
    assert result.inputs["clipped_requests"] == 0 and "notes" not in result.inputs


def test_fixed_lengths_beyond_the_context_are_refused_unless_set_larger():
    err = _refused(prompt_tokens="5000")
    assert err.field == "prompt_tokens" and "4096" in err.problem
    assert "--max-model-len" in err.allowed
    result = run(ServeRequest.from_options(SMALL, prompt_tokens="5000", max_model_len=8192,
                                           gpu="h100-sxm"))
    assert result.inputs["max_model_len"] == 8192
    assert "above llama-2-7b's max_position_embeddings" in result.inputs["notes"][0]
    assert result.simulation.requests["prompt_tokens"].min() == 5000
    assert _refused(max_model_len=256).field == "max_model_len"


def test_drawn_lengths_beyond_it_are_clipped_and_reported():
    result = run(ServeRequest.from_options(SMALL, lengths="uniform", prompt_tokens="400,900",
                                           output_tokens="100,200", max_model_len=700))
    clipped = result.inputs["clipped_requests"]
    assert clipped > 0 and f"{clipped} requests" in result.inputs["notes"][-1]
    r = result.requests
    assert (r["prompt_tokens"] + r["output_tokens"]).max() <= 700


def test_chats_growing_past_it_are_refused_naming_it():
    err = _refused(turns=4, prompt_tokens="1000", output_tokens="200")
    assert err.field == "max_model_len" and "4800" in err.problem


def test_long_requests_run_without_a_4096_cap():
    result = run(ServeRequest.from_options(SMALL, model="llama-3.1-8b", gpu="h100-sxm",
                                           prompt_tokens="15000", output_tokens="1000"))
    assert result.inputs["max_model_len"] == 131072
    assert result.requests["prompt_tokens"].min() == 15000


def test_the_cli_flag_is_the_request_option():
    res = runner.invoke(app, ["serve", "--qps", "2", "--num-requests", "8", "--json",
                              "--max-model-len", "2048"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["inputs"]["max_model_len"] == 2048


# -- experts, quantisation, heads --------------------------------------------------------------
def test_moe_tp_sets_the_expert_split_or_is_refused_naming_it():
    ok = ServeRequest.from_options(SMALL, model="mixtral-8x7b", gpu="h100-sxm", tp=4, ep=2,
                                   moe_tp=2)
    assert resolve(ok).config.plan.moe_tp == 2
    err = _refused(model="mixtral-8x7b", gpu="h100-sxm", tp=4, ep=2, moe_tp=1)
    assert err.field == "moe_tp" and "must equal" in err.problem
    # vLLM's DP without EP: experts TP-split over all tp x dp ranks, tokens gathered
    dp = resolve(ServeRequest.from_options(SMALL, model="mixtral-8x7b", gpu="h100-sxm",
                                           attention_dp=4, replicas=4, moe_tp=4))
    plan = dp.config.plan
    assert (plan.ep, plan.moe_tp, plan.expert_tp, plan.moe_token_ranks) == (1, 4, 4, 4)
    err = _refused(model="mixtral-8x7b", gpu="h100-sxm", attention_dp=4, replicas=4)
    assert err.field == "attention_dp" and "needs ep > 1 or moe_tp" in err.problem


def test_quantisation_schemes_set_the_precision_and_say_how_they_were_priced():
    r = resolve(ServeRequest.from_options(SMALL, gpu="b200-sxm", gemm_quant="nvfp4",
                                          moe_quant="nvfp4"))
    assert r.config.precision.weights.value == "fp4" and r.quant["gemm_quant"] == "nvfp4"
    r = resolve(ServeRequest.from_options(SMALL, gpu="h100-sxm", gemm_quant="int4_wo"))
    assert (r.config.precision.weights.value, r.config.precision.activations.value) == (
        "int4", "bf16")
    r = resolve(ServeRequest.from_options(SMALL, gpu="h100-sxm", dtype="fp8",
                                          gemm_quant="fp8", moe_quant="fp8_block"))
    assert "block-scaled" in r.quant["note"]
    assert _refused(gemm_quant="fp8", moe_quant="nvfp4").field == "moe_quant"
    assert _refused(dtype="fp4", gemm_quant="fp8").field == "dtype"
    assert _refused(gemm_quant="fp6").field == "gemm_quant"


def test_kv_heads_fewer_than_tp_are_replicated_as_the_engines_do():
    """Llama-3.1-70B: 64 query heads, 8 KV heads; at TP 16 every rank holds one KV head,
    two ranks share it (vLLM/SGLang num_kv_head_replicas)."""
    config = ServeConfig(model="llama-3.1-70b", gpu="h100-sxm", tp=16)
    assert config.tp == 16
    with pytest.raises(InputError) as err:
        ServeConfig(model="llama-3.1-70b", gpu="h100-sxm", tp=12)
    assert err.value.field == "tp" and "query heads" in err.value.problem
    odd = get_model("llama-3-8b").model_copy(update={"num_heads": 24, "num_kv_heads": 6})
    with pytest.raises(InputError) as err:
        ServeConfig(model=odd, gpu="h100-sxm", tp=8)
    assert "replicate" in err.value.problem and 12 in [int(a) for a in
                                                       err.value.allowed.split(", ")]


def test_moe_quant_on_a_dense_model_is_refused_not_priced_as_dense():
    request = ServeRequest.from_options({"model": "llama-3.1-8b", "gpu": "h100-sxm",
                                         "moe_quant": "fp8", "num_requests": 4})
    with pytest.raises(InputError) as err:
        resolve(request)
    assert err.value.field == "moe_quant"
    both = ServeRequest.from_options({"model": "llama-3.1-8b", "gpu": "h100-sxm",
                                      "moe_quant": "fp8", "gemm_quant": "fp8",
                                      "num_requests": 4, "concurrency": 2})
    resolve(both)  # the same scheme for both: the dense GEMMs take gemm_quant's


def test_inferred_model_features_are_noted_in_the_payload():
    result = run(ServeRequest.from_options({
        "model": "minimax-m3", "gpu": "b200-sxm", "tp": 8, "dtype": "fp8",
        "num_requests": 4, "concurrency": 2, "prompt_tokens": "256", "output_tokens": "8"}))
    notes = result.payload()["inputs"]["notes"]
    assert any(n.startswith("model: gated MLP") for n in notes)


def test_fp4_checkpoint_on_hopper_runs_weight_only_and_says_so():
    request = ServeRequest.from_options({"model": "gpt-oss-120b", "gpu": "h100-sxm",
                                         "moe_quant": "mxfp4", "gemm_quant": "mxfp4",
                                         "num_requests": 4, "concurrency": 2})
    resolved = resolve(request)
    precision = resolved.config.precision
    assert (precision.weights.value, precision.activations.value) == ("fp4", "bf16")
    assert "no fp4 tensor cores" in resolved.quant["weight_only"]
    blackwell = resolve(ServeRequest.from_options({
        "model": "gpt-oss-120b", "gpu": "b200-sxm", "moe_quant": "mxfp4", "gemm_quant": "mxfp4",
        "num_requests": 4, "concurrency": 2}))
    assert blackwell.config.precision.activations.value == "fp4"
    assert "weight_only" not in blackwell.quant


def test_attention_free_and_hybrid_models_serve_with_their_states_bounding_concurrency():
    mamba = run(ServeRequest.from_options({
        "model": "falcon-mamba-7b", "gpu": "h200-sxm", "tp": 8, "concurrency": 4,
        "num_requests": 8, "prompt_tokens": "512", "output_tokens": "16", "max_batch": 64}))
    out = mamba.payload()
    assert out["kv_capacity_tokens"] is None and out["max_concurrent_seqs"] == 64
    assert out["tpot_s"]["mean"] > 0
    hybrid = run(ServeRequest.from_options({
        "model": "qwen3-next-80b-a3b", "gpu": "h200-sxm", "tp": 4, "concurrency": 4,
        "num_requests": 8, "prompt_tokens": "512", "output_tokens": "16", "max_batch": 64}))
    assert hybrid.payload()["max_concurrent_seqs"] <= 64


# -- memory: the engine's rule over the memory CUDA reports ----------------------------------

def test_payload_shows_each_gpus_memory_plan_by_the_engines_rule():
    plans = {}
    for stack in ("vllm", "trtllm"):
        out = run(ServeRequest.from_options({
            **SMALL, "model": "llama-3.1-8b", "gpu": "h100-sxm", "stack": stack,
            "prompt_tokens": "512", "output_tokens": "16"})).payload()
        plans[stack] = memory = out["memory"]
        parts = sum(memory[k] for k in ("weights_bytes", "activation_bytes", "runtime_bytes",
                                        "state_bytes", "kv_bytes"))
        assert parts == pytest.approx(memory["held_bytes"])
        assert memory["cuda_total_bytes"] > 84e9  # the H100's 79.11 GiB, not its 80 GB label
        assert "79.11 GiB" in memory["cuda_total_source"]
        assert out["kv_capacity_tokens"] * 2 * 32 * 1024 * 2 == pytest.approx(
            memory["kv_bytes"], rel=0.01)  # K+V of 8 KV heads x 128 over 32 layers, bf16
    assert (plans["vllm"]["kv_budget"], plans["trtllm"]["kv_budget"]) == ("total", "free")
    assert plans["vllm"]["held_bytes"] == pytest.approx(0.9 * plans["vllm"]["cuda_total_bytes"])
    assert plans["trtllm"]["kv_bytes"] > plans["vllm"]["kv_bytes"]
