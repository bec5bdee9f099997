import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.errors import InputError
from perfcast.serve import ServeConfig, plan_memory
from perfcast.serve._kv import KVCache
from perfcast.specs import KVBudget, cuda_total_bytes, get_device, get_stack

BASE = {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb"}


def test_memory_plan_fills_the_gpu():
    m = plan_memory(ServeConfig(**BASE))
    assert 13e9 < m.weights_bytes < 14e9  # 6.7B parameters in bf16
    assert m.bytes_per_block == 16 * 2 * 32 * 4096 * 2  # K+V, 32 layers, 4096 wide, bf16
    assert m.weights_bytes + m.activation_bytes + m.runtime_bytes + m.kv_bytes \
        == pytest.approx(m.usable_bytes)
    assert 6000 < m.blocks < 7500  # vLLM reports ~7k blocks for this deployment
    assert plan_memory(ServeConfig(**BASE, tp=2)).blocks > 2 * m.blocks


def test_model_that_does_not_fit_names_the_field():
    with pytest.raises(InputError) as err:
        plan_memory(ServeConfig(model="llama-2-70b", gpu="a100-sxm4-80gb"))
    assert err.value.field == "gpu_memory_utilization"


def test_block_pool_watermark_and_swap():
    config = ServeConfig(**BASE, watermark=0.1)
    kv = KVCache(config, plan_memory(config))
    assert kv.blocks_for(16) == 1 and kv.blocks_for(17) == 2
    assert not kv.can_admit(kv.capacity - kv.watermark + 1)
    kv.allocate(100)
    seconds = kv.swap_out(40)
    assert seconds > 0 and kv.used == 60 and kv.host_used == 40
    assert kv.swap_in(40) == pytest.approx(seconds) and kv.used == 100
    with pytest.raises(AssertionError):
        kv.allocate(kv.capacity)


# ---- what gpu_memory_utilization is a share of: the stack's KV budget (specs.KVBudget) ----

DSV3_B200_TP4 = {"model": "deepseek-v3", "gpu": "b200-sxm", "tp": 4, "moe_tp": 4,
                 "max_batch": 32, "max_batch_tokens": 8192, "max_context": 9216,
                 "scheduler": "vllm-v1", "precision": {"weights": "fp8", "activations": "fp8",
                                                       "kv_cache": "fp8"}}


def test_vllm_budget_is_a_share_of_the_cuda_total_not_the_label():
    m = plan_memory(ServeConfig(**BASE))
    total, _ = cuda_total_bytes(get_device("a100-sxm4-80gb"))
    assert m.usable_bytes == pytest.approx(0.9 * total)
    assert m.kv_budget == "total"
    # Vidur's simulator gives this deployment 7,424 blocks (vLLM's planner at 80 GiB)
    assert abs(m.blocks - 7424) / 7424 < 0.01


def test_shipped_engines_name_their_budget_and_a_given_one_wins():
    assert get_stack("vllm").kv_budget is KVBudget.TOTAL
    assert get_stack("sglang").kv_budget is KVBudget.TOTAL
    assert get_stack("trtllm").kv_budget is KVBudget.FREE
    assert ServeConfig(**BASE).budget_rule is KVBudget.TOTAL  # no stack: vLLM's rule
    assert ServeConfig(**BASE, kv_budget="free").budget_rule is KVBudget.FREE
    assert ServeConfig(**BASE, stack="trtllm", kv_budget="total").budget_rule \
        is KVBudget.TOTAL
    with pytest.raises(InputError) as err:
        ServeConfig(**BASE, kv_budget="half")
    assert err.value.field == "kv_budget"


def test_trtllm_takes_its_fraction_of_what_the_model_leaves_free():
    m = plan_memory(ServeConfig(**BASE, stack="trtllm"))
    total, _ = cuda_total_bytes(get_device("a100-sxm4-80gb"))
    placed = m.weights_bytes + m.activation_bytes + m.runtime_bytes + m.state_bytes
    assert m.kv_budget == "free"
    assert m.kv_bytes == pytest.approx(0.9 * (total - placed))
    assert m.usable_bytes == pytest.approx(placed + m.kv_bytes)
    assert m.blocks > plan_memory(ServeConfig(**BASE, stack="vllm")).blocks


def test_a_deployment_that_ran_is_not_refused():
    """DeepSeek-V3 FP8 on four B200 at TP4 ran under TensorRT-LLM and SGLang (AIConfigurator
    silicon_sample_dev: dsr1_b200_trtllm_fp8_agg_1024x1024_c8_cfg473 and its SGLang rows);
    the B200's 180 GB label left it no KV block."""
    for stack in ("trtllm", "sglang"):
        m = plan_memory(ServeConfig(**DSV3_B200_TP4, stack=stack))
        assert m.blocks > 1000
    free = plan_memory(ServeConfig(**DSV3_B200_TP4, stack="trtllm"))
    total = plan_memory(ServeConfig(**DSV3_B200_TP4, stack="sglang"))
    assert free.kv_bytes > 3 * total.kv_bytes  # 0.9 of ~24 GB free vs what 0.9 x total leaves


def test_refusal_names_the_budget_rule():
    with pytest.raises(InputError) as err:
        plan_memory(ServeConfig(model="llama-2-70b", gpu="a100-sxm4-80gb", stack="trtllm"))
    assert err.value.field == "gpu_memory_utilization"
    assert "free_gpu_memory_fraction" in str(err.value)


@settings(max_examples=60, deadline=None)
@given(fraction=st.floats(0.5, 1.0), stack=st.sampled_from(["vllm", "trtllm"]))
def test_parts_add_up_and_free_never_gives_less(fraction, stack):
    """The rules compared on one engine setting (the stacks' engine defaults differ in
    token budget on an A100, hence in activation workspace)."""
    engine = {"scheduler": "vllm-v1", "max_batch": 256, "max_batch_tokens": 8192}
    m = plan_memory(ServeConfig(**BASE, **engine, stack=stack, gpu_memory_utilization=fraction))
    parts = m.weights_bytes + m.activation_bytes + m.runtime_bytes + m.state_bytes
    assert parts + m.kv_bytes == pytest.approx(m.usable_bytes)
    assert m.usable_bytes <= cuda_total_bytes(get_device("a100-sxm4-80gb"))[0] * (1 + 1e-12)
    vllm = plan_memory(ServeConfig(**BASE, **engine, stack="vllm",
                                   gpu_memory_utilization=fraction))
    assert m.kv_bytes >= vllm.kv_bytes * (1 - 1e-12)  # f(T - P) - (fT - P) = P(1 - f) >= 0
