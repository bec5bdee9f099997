"""`perfcast train` on a stack that trains the eager HF graph (compose.EagerGraph): the same
op table `perfcast step --mode training` prices, where it describes the plan."""

from __future__ import annotations

import pandas as pd
import pytest

from perfcast.api import run_options
from perfcast.compose import EagerGraph, training_step_ops
from perfcast.errors import InputError
from perfcast.ops import eager_ops
from perfcast.specs import ParallelPlan, Precision, get_model, get_stack

ONE_GPU = {"model": "llama-3.2-1b", "gpu": "h100-sxm", "num_gpus": 1, "micro_batch": 2,
           "seq_len": 1024}


def _train(**options) -> dict:
    return run_options("train", {**ONE_GPU, **options}).payload()


def test_eager_stacks_name_their_graph_and_megatron_keeps_the_fused_table():
    assert {s: get_stack(s).training_graph for s in ("hf-transformers", "fsdp",
            "megatron-core", "llm-foundry")} == {"hf-transformers": "eager", "fsdp": "eager",
                                                 "megatron-core": "megatron",
                                                 "llm-foundry": "megatron"}
    hf, mc = _train(stack="hf-transformers"), _train(stack="megatron-core")
    assert hf["inputs"]["kernel_model"]["op_graph"] == (
        "eager (sdpa attention; autocast over fp32 parameters; host 50.9 us per kernel)")
    amp = _train(stack="hf-transformers", memory_policy="amp")
    assert amp["inputs"]["kernel_model"]["op_graph"] == ("eager (sdpa attention; host 50.9 "
                                                         "us per kernel)")
    assert mc["inputs"]["kernel_model"]["op_graph"] == "megatron"
    # unfused RMSNorm casts, RoPE, SiLU-and-mul and residual adds: more kernel time
    assert hf["breakdown"]["compute_s"] > 1.1 * mc["breakdown"]["compute_s"]


def test_the_train_table_is_the_step_table():
    model, precision = get_model("llama-3.2-1b"), Precision.uniform("bf16")
    ours = training_step_ops(model, 2, 1024, precision, ParallelPlan(tp=2),
                             graph=EagerGraph())
    step = eager_ops(model, 2, 1024, "training", precision, ParallelPlan(tp=2),
                     attention="sdpa")
    pd.testing.assert_frame_equal(ours.reset_index(drop=True), step.reset_index(drop=True))


@pytest.mark.parametrize("plan, lora", [(ParallelPlan(tp=2, sp=True), None),
                                        (ParallelPlan(cp=2), None), (ParallelPlan(), 8)])
def test_plans_the_eager_table_cannot_describe_get_the_fused_one(plan, lora):
    model, precision = get_model("llama-3.2-1b"), Precision.uniform("bf16")
    assert not EagerGraph.expresses(plan, lora)
    pd.testing.assert_frame_equal(
        training_step_ops(model, 2, 1024, precision, plan, lora_rank=lora, graph=EagerGraph()),
        training_step_ops(model, 2, 1024, precision, plan, lora_rank=lora))


def test_both_tables_end_with_the_same_fp32_loss():
    model, precision = get_model("llama-3.2-1b"), Precision.uniform("bf16")
    names = ["cast:logits_to_fp32", "softmax:log_softmax", "fill:nll_loss_bwd",
             "softmax:log_softmax_bwd", "cast:grad_to_input_dtype"]
    tables = [training_step_ops(model, 2, 1024, precision, graph=g)
              for g in (None, EagerGraph())]
    losses = [t[t["op"].isin(names)].reset_index(drop=True) for t in tables]
    assert list(losses[0]["op"]) == names
    pd.testing.assert_frame_equal(losses[0], losses[1])


def test_the_plan_search_prices_a_plan_as_the_single_plan_forecast_does():
    search = run_options("train", {**ONE_GPU, "stack": "hf-transformers", "sweep": True,
                                   "global_batch": 4, "top": 50}).payload()["top"]
    row = next(r for r in search if r["micro_batch"] == 2 and r["zero_stage"] == 0
               and r["recompute"] == "none")
    one = _train(stack="hf-transformers", global_batch=4)
    assert row["iteration_time_s"] == pytest.approx(one["iteration_time_s"], rel=1e-12)


def test_autocast_costs_casts_and_an_fp32_stream_and_pure_bf16_a_lighter_adam():
    # torch-amp (the stack's default: HF Trainer's bf16=True) runs the graph under autocast;
    # amp keeps 16-bit parameters (fp32 master in the optimizer), so its kernels are pure
    # bf16's, as FSDP2's mixed precision runs them
    torch_amp, amp, pure = (_train(stack="hf-transformers", memory_policy=p)
                            for p in ("torch-amp", "amp", "pure-bf16"))
    assert _train(stack="hf-transformers")["inputs"]["memory_policy"] == "torch-amp"
    assert torch_amp["breakdown"]["compute_s"] > 1.05 * amp["breakdown"]["compute_s"]
    assert amp["breakdown"]["compute_s"] == pure["breakdown"]["compute_s"]
    assert pure["breakdown"]["optimizer_s"] < 0.7 * amp["breakdown"]["optimizer_s"]


def test_eager_memory_holds_the_loss_and_lets_gradients_replace_activations():
    # eager PyTorch frees activations as it allocates gradients (set_to_none), and the
    # loss holds three fp32 tensors per logit at its backward
    hf = _train(stack="hf-transformers", memory_policy="amp")
    mc = _train(stack="megatron-core", memory_policy="amp")
    states = get_model("llama-3.2-1b").total_params() * 2  # bf16 gradients
    assert mc["memory"]["gradients"] == pytest.approx(states, rel=0.01)
    assert hf["memory"]["gradients"] == pytest.approx(
        max(states - hf["memory"]["activations"], 0.0), rel=1e-9)
    assert any("set_to_none" in n for n in hf["notes"])
    assert not any("set_to_none" in n for n in mc["notes"])
    vocab_tokens = 2 * 1024 * get_model("llama-3.2-1b").vocab_size
    assert (hf["memory"]["activations"] - mc["memory"]["activations"]
            == pytest.approx(8 * vocab_tokens, rel=1e-6))


def test_autocast_table_casts_weights_and_inputs_and_keeps_the_stream_fp32():
    model, precision = get_model("llama-3.2-1b"), Precision.uniform("bf16")
    amp = eager_ops(model, 2, 512, "forward", precision, attention="sdpa", autocast=True)
    pure = eager_ops(model, 2, 512, "forward", precision, attention="sdpa")
    ops = set(amp["op"])
    # seven weights per layer and the LM head; q/k/v, gate/up and the LM head cast the
    # fp32 stream; RMSNorm's own casts are no-ops on an fp32 input
    assert {f"cast:{w}.weight_to_16" for w in ("q_proj", "k_proj", "v_proj", "o_proj",
                                               "gate_proj", "up_proj", "fc2", "lm_head")} <= ops
    assert {f"cast:{w}.input_to_16" for w in ("q_proj", "k_proj", "v_proj", "gate_proj",
                                              "up_proj", "lm_head")} <= ops
    assert "cast:o_proj.input_to_16" not in ops and "cast:ln_1.to_fp32" not in ops
    residual = [t[t["op"] == "add:mlp_residual"].iloc[0] for t in (amp, pure)]
    assert residual[0]["bytes_written"] == 2 * residual[1]["bytes_written"]
    gemms = [t[t["family"] == "gemm"].reset_index(drop=True) for t in (amp, pure)]
    pd.testing.assert_frame_equal(gemms[0], gemms[1])


def test_autocast_needs_a_16_bit_dtype():
    with pytest.raises(InputError) as e:
        eager_ops(get_model("llama-3.2-1b"), 1, 64, "training", Precision.uniform("fp32"),
                  autocast=True)
    assert e.value.field == "autocast"


def test_small_micro_batches_wait_on_the_eager_host():
    host = get_stack("hf-transformers").host
    small = _train(stack="hf-transformers", micro_batch=1, seq_len=128)
    big = _train(stack="hf-transformers", micro_batch=8, seq_len=2048)
    mc = _train(stack="megatron-core", micro_batch=1, seq_len=128)
    # a tiny micro-batch is host-bound: the iteration is at least its kernels' dispatch
    kernels = len(eager_ops(get_model("llama-3.2-1b"), 1, 128, "training",
                            Precision.uniform("bf16"), attention="sdpa", autocast=True)
                  .pipe(lambda t: t.loc[t.index.repeat(t["count"])]))
    assert small["iteration_time_s"] >= kernels * host.train_dispatch_s
    assert small["breakdown"]["host_s"] > small["breakdown"]["compute_s"]
    # long kernels hide the host: only the fixed part and the short tail stay exposed
    assert big["breakdown"]["host_s"] < 0.1 * big["iteration_time_s"]
    assert mc["breakdown"]["host_s"] == 0.0


def test_a_training_step_charges_the_stacks_training_host():
    host = get_stack("hf-transformers").host
    options = {"model": "llama-3.2-1b", "gpu": "h100-sxm", "batch": 1, "seq_len": 128,
               "dtype": "bf16"}
    train = run_options("step", {**options, "mode": "training"}).payload()["inputs"]
    forward = run_options("step", {**options, "mode": "forward"}).payload()["inputs"]
    assert train["dispatch_s"] == host.train_dispatch_s
    assert forward["dispatch_s"] == host.op_dispatch_s + host.module_s


def test_a_hosted_eager_step_waits_on_its_host_and_the_fused_one_does_not():
    from perfcast.compose import training_step
    from perfcast.specs import get_cluster

    model, cluster = get_model("llama-3.2-1b"), get_cluster("dgx-h100", 1)
    host = get_stack("hf-transformers").host
    graph = EagerGraph(host_dispatch_s=host.train_dispatch_s)
    eager = training_step(model, 1, 128, cluster, graph=graph)
    fused = training_step(model, 1, 128, cluster)
    sp = training_step(model, 1, 128, cluster, plan=ParallelPlan(tp=1, cp=1), lora_rank=4,
                       graph=graph)
    assert eager.launch_s > 0 and fused.launch_s == 0 and sp.launch_s == 0
