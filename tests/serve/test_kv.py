import pytest

from perfcast.errors import InputError
from perfcast.serve import ServeConfig, plan_memory
from perfcast.serve._kv import KVCache

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
