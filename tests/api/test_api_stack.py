"""`--stack` on infer, serve and train: resolved once, recorded in every payload, and used."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from perfcast.api import InferRequest, ServeRequest, TrainRequest, run
from perfcast.api._choices import DEFAULT_STACKS
from perfcast.api._engine_host import engine_host
from perfcast.cli import app
from perfcast.compose import Execution
from perfcast.errors import InputError
from perfcast.specs import get_stack

runner = CliRunner()
LLAMA = {"model": "llama-2-7b", "gpu": "h100-sxm", "prompt_tokens": 1024,
         "output_tokens": 32}


def _infer(**extra):
    return run(InferRequest.from_options({**LLAMA, **extra})).payload()


def test_every_payload_names_its_stack_and_where_each_family_comes_from():
    out = _infer()
    assert out["inputs"]["stack"]["name"] == DEFAULT_STACKS["infer"]
    families = out["inputs"]["kernel_model"]["families"]
    assert families["gemm"]["status"] == "measured" and "h100-sxm" in families["gemm"]["devices"]
    assert families["norm"]["status"] == "borrowed" and families["norm"]["note"]


def test_eager_hf_decode_is_slower_than_a_serving_engine():
    engine, hf, legacy = (_infer(stack=s) for s in ("trtllm", "hf-transformers",
                                                     "hf-transformers-legacy"))
    assert engine["tpot_s"] < hf["tpot_s"] and engine["tpot_s"] < legacy["tpot_s"]
    assert hf["inputs"]["execution"] == "eager" and engine["inputs"]["execution"] == "cuda-graph"
    assert any("lower bound" in n for n in legacy["notes"])  # its generate_s is unmeasured
    assert not any("lower bound" in n for n in hf["notes"])


@pytest.mark.parametrize("speed", [1.0, 2.5])
def test_generate_bookkeeping_is_paid_per_decode_step_only(speed):
    """HF generate(): step_s on every forward, generate_s on each decode step beyond it,
    both divided by the host speed; a serving engine's decode pays no generate_s."""
    host = get_stack("hf-transformers").host
    out = _infer(stack="hf-transformers", host_speed=speed)
    steps = out["breakdown"]
    assert steps["prefill"]["host_s"] == pytest.approx(host.step_s / speed)
    assert steps["decode_step"]["host_s"] == pytest.approx((host.step_s + host.generate_s)
                                                           / speed)
    assert out["inputs"]["host_generate_s"] == pytest.approx(host.generate_s / speed)
    engine = _infer(stack="vllm")["breakdown"]
    assert engine["decode_step"]["host_s"] == pytest.approx(engine["prefill"]["host_s"])


def test_vllm_prices_with_its_own_tables():
    vllm, trt = _infer(stack="vllm"), _infer(stack="trtllm")
    assert vllm["tpot_s"] != trt["tpot_s"]
    assert vllm["inputs"]["kernel_model"]["families"]["attn_decode"]["kernel_source"] == "vllm"


def test_explicit_execution_overrides_the_stack_and_says_so():
    out = _infer(stack="vllm", execution="eager")
    assert out["inputs"]["execution"] == "eager"
    assert out["inputs"]["overrides_of_stack"] == ["execution"]


@settings(max_examples=15, deadline=None)
@given(st.floats(0.1, 10.0))
def test_host_speed_divides_host_costs(speed):
    stack = get_stack("hf-transformers")
    host = engine_host(stack, None, None, speed)
    assert host.dispatch_s == pytest.approx(stack.host.op_dispatch_s / speed)
    assert host.execution == Execution.EAGER


def test_unknown_stack_exits_2_naming_the_field():
    res = runner.invoke(app, ["infer", "--model", "llama-2-7b", "--gpu", "h100-sxm",
                              "--stack", "vlm"])
    assert res.exit_code == 2 and "stack" in res.stderr and "vllm" in res.stderr


def test_eager_graph_refuses_context_parallel():
    with pytest.raises(InputError) as exc:
        run(InferRequest.from_options({**LLAMA, "stack": "hf-transformers", "cp": 2,
                                       "num_gpus": 2}))
    assert exc.value.field == "stack"


def test_serve_records_the_stack():
    out = run(ServeRequest.from_options({"model": "llama-2-7b", "gpu": "h100-sxm", "qps": 1,
                                         "num_requests": 8, "stack": "sglang"})).payload()
    assert out["inputs"]["stack"]["name"] == "sglang"
    assert out["inputs"]["kernel_model"]["families"]["gemm"]["kernel_source"] == "sglang"


def test_train_stack_chooses_kernels_and_memory_policy():
    base = {"model": "llama-2-7b", "gpu": "h100-sxm", "num_gpus": 8, "zero": 1}
    default = run(TrainRequest.from_options(base)).payload()
    old = run(TrainRequest.from_options({**base, "stack": "none"})).payload()
    assert default["iteration_time_s"] == old["iteration_time_s"]  # none = megatron-core
    assert default["inputs"]["kernel_model"]["stack"] == "megatron-core"
    foundry = run(TrainRequest.from_options({**base, "stack": "llm-foundry"})).payload()
    assert foundry["iteration_time_s"] > default["iteration_time_s"]


def test_a_stack_of_training_factors_is_refused_outside_train():
    with pytest.raises(InputError) as exc:
        run(InferRequest.from_options({**LLAMA, "stack": "llm-foundry"}))
    assert exc.value.field == "stack" and "llm-foundry" not in exc.value.allowed
