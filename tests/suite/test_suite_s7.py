"""Scenario S7 (ResNet-50 and ViT-B/16 inference on 1xL4) is supported through the suite."""

from importlib import resources

from perfcast.suite import run_scenario
from perfcast.suite._schema import parse_scenario


def test_s7_prints_latency_throughput_and_the_bf16_speedups():
    text = (resources.files("perfcast.suite") / "data/scenarios/46-s7.yaml").read_text()
    result = run_scenario(parse_scenario(text))
    assert result.status == "supported", result.errors
    values = {(v.name, v.run): v.value for v in result.values}
    assert len(values) == 2 * 8 + 2
    for model in ("ResNet-50", "ViT-B/16"):
        assert values[(f"{model} bf16 speed-up over fp32 at batch 64",
                       "resnet50-bf16-b64" if model == "ResNet-50" else "vit-bf16-b64")] > 1
    assert values[("throughput", "vit-bf16-b64")] > values[("throughput", "vit-bf16-b1")]
