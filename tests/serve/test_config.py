import pytest

from perfcast.errors import InputError
from perfcast.serve import ServeConfig
from perfcast.specs import get_stack

BASE = {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb"}


@pytest.mark.parametrize(("change", "field"), [
    ({"tp": 0}, "tp"), ({"scheduler": "vlm"}, "scheduler"), ({"model": "lama-2-7b"}, "model"),
    ({"gpu": "a100-xyz"}, "gpu"), ({"cluster": "dgx-a100"}, "gpu"), ({"tp": 3}, "tp"),
    ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"), ({"router": "x"}, "router"),
    ({"scheduler": "sarathi", "chunk_size": 64}, "chunk_size"), ({"block_size": 0}, "block_size"),
    ({"preemption": "drop"}, "preemption"), ({"host": "sglang"}, "host"),
    ({"unknown": 1}, "unknown"), ({"precision": "int3"}, "precision"),
    ({"prefill_dispatch_s": -1e-6}, "prefill_dispatch_s"), ({"host_speed": 0}, "host_speed"),
    ({"prefill_dispatch_s": 0.01}, "prefill_dispatch_s"),
])
def test_bad_config_names_the_field(change, field):
    with pytest.raises(InputError) as err:
        ServeConfig(**{**BASE, **change})
    assert err.value.field.split(".")[0] == field


def test_unknown_model_suggests_close_names():
    with pytest.raises(InputError, match="llama-2-7b"):
        ServeConfig(**{**BASE, "model": "lama-2-7b"})


def test_defaults_follow_the_schedulers():
    assert ServeConfig(**BASE, scheduler="sarathi").token_budget == 512
    assert ServeConfig(**BASE, scheduler="vllm-v1").token_budget == 8192
    assert ServeConfig(**BASE).token_budget >= ServeConfig(**BASE).context_limit
    assert ServeConfig(**BASE, precision="fp16").precision.weights.value == "fp16"
    with pytest.raises(Exception):  # noqa: B017 - frozen
        ServeConfig(**BASE).tp = 2


@pytest.mark.parametrize(("stack", "gpu", "expected"), [
    # vLLM arg_utils.get_batch_defaults: >= 70 GiB but not A100 -> 8192 tokens, 1024 seqs
    ("vllm", "h100-sxm", ("vllm-v1", 1024, 8192)),
    ("vllm", "a100-sxm4-80gb", ("vllm-v1", 256, 2048)),
    ("vllm", "l40s", ("vllm-v1", 256, 2048)),
    # SGLang chunked_prefill_size: < 35 GiB 2048, < 160 GiB 8192, else 16384
    ("sglang", "h200-sxm", ("prefill-first", 2048, 8192)),
    ("sglang", "b200-sxm", ("prefill-first", 2048, 16384)),
    ("trtllm", "h100-sxm", ("vllm-v1", 2048, 8192)),
])
def test_a_stack_engine_fills_what_the_user_left_unset(stack, gpu, expected):
    config = ServeConfig(model="llama-2-7b", gpu=gpu, stack=stack)
    assert (config.scheduler, config.max_batch, config.token_budget) == expected
    assert config.engine_defaults["from_stack"] == ["scheduler", "max_batch",
                                                    "max_batch_tokens"]
    assert config.engine_defaults["provenance"]


def test_what_the_user_gives_wins_over_the_stack_engine():
    config = ServeConfig(model="llama-2-7b", gpu="h100-sxm", stack="vllm", max_batch=64)
    assert (config.scheduler, config.max_batch, config.token_budget) == ("vllm-v1", 64, 8192)
    assert config.engine_defaults["from_stack"] == ["scheduler", "max_batch_tokens"]
    # another scheduler named: the generic defaults, not the stack's limits
    other = ServeConfig(model="llama-2-7b", gpu="h100-sxm", stack="vllm", scheduler="sarathi")
    assert (other.max_batch, other.token_budget, other.engine_defaults) == (256, 512, {})


def test_without_a_stack_engine_the_generic_defaults_hold():
    for stack in (None, "hf-transformers"):
        config = ServeConfig(model="llama-2-7b", gpu="h100-sxm", stack=stack)
        assert (config.scheduler, config.max_batch) == ("vllm-v0", 256)
        assert config.engine_defaults == {}
        assert config.token_budget >= config.context_limit


def test_default_sequences_fit_a_speculative_step():
    config = ServeConfig(model="llama-2-7b", gpu="h100-sxm", stack="trtllm", spec_k=4)
    assert config.max_batch == 8192 // 5 and config.token_budget == 8192


def test_prefill_dispatch_is_the_stacks_unless_given():
    for stack in ("sglang", "trtllm", "vllm"):
        config = ServeConfig(model="llama-2-7b", gpu="h100-sxm", stack=stack)
        assert config.prefill_dispatch == get_stack(stack).host.prefill_dispatch_s
    assert ServeConfig(**BASE).prefill_dispatch == 0.0  # no stack: no engine host to charge
    given = ServeConfig(model="llama-2-7b", gpu="h100-sxm", stack="sglang",
                        prefill_dispatch_s=3e-5)
    assert given.prefill_dispatch == 3e-5
