"""Scenario S6 (Llama-3-70B on 256xH100, FSDP2 HSDP 8x32 vs Megatron-Core TP8xPP4xDP8) is
supported through the suite, and both plans fit the H100's CUDA-visible memory."""

from importlib import resources

from perfcast.api import request_from_options, run
from perfcast.suite import run_scenario
from perfcast.suite._schema import parse_scenario


def _scenario():
    text = (resources.files("perfcast.suite") / "data/scenarios/48-s6.yaml").read_text()
    return parse_scenario(text)


def test_s6_prints_iteration_time_mfu_and_exposed_comm_for_both_stacks():
    result = run_scenario(_scenario())
    assert result.status == "supported", result.errors
    values = {(v.path, v.run): v.value for v in result.values}
    for run_name in ("fsdp2-hsdp", "megatron-core"):
        assert values[("iteration_time_s", run_name)] > 0
        assert 0 < values[("mfu", run_name)] < 1
        assert values[("breakdown.exposed_comm_s", run_name)] >= 0
    ratio = [v.value for v in result.values if v.name.startswith("Megatron-Core's speed-up")]
    assert len(ratio) == 1 and ratio[0] > 0


def test_s6_plans_fit_and_are_the_ones_asked():
    for name, options in _scenario().runs().items():
        payload = run(request_from_options("train", options)).payload()
        inputs = payload["inputs"]
        assert payload["fits"], name
        assert payload["memory_per_gpu_bytes"] <= inputs["memory_budget"]["budget_bytes"]
        assert inputs["num_gpus"] == 256 and inputs["global_batch"] == 1024
        if name == "fsdp2-hsdp":
            assert (inputs["tp"], inputs["pp"], inputs["dp"]) == (1, 1, 256)
            assert (inputs["zero_stage"], inputs["shard_group"]) == (3, 32)
        else:
            assert (inputs["tp"], inputs["pp"], inputs["dp"]) == (8, 4, 8)
            assert inputs["memory_policy"] == "amp-distributed"
