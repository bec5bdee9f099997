import pytest

from perfcast.errors import InputError
from perfcast.serve import ServeConfig

BASE = {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb"}


@pytest.mark.parametrize(("change", "field"), [
    ({"tp": 0}, "tp"), ({"scheduler": "vlm"}, "scheduler"), ({"model": "lama-2-7b"}, "model"),
    ({"gpu": "a100-xyz"}, "gpu"), ({"cluster": "dgx-a100"}, "gpu"), ({"tp": 3}, "tp"),
    ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"), ({"router": "x"}, "router"),
    ({"scheduler": "sarathi", "chunk_size": 64}, "chunk_size"), ({"block_size": 0}, "block_size"),
    ({"preemption": "drop"}, "preemption"), ({"host": "sglang"}, "host"),
    ({"unknown": 1}, "unknown"), ({"precision": "int3"}, "precision"),
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
