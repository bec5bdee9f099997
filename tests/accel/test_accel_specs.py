"""Architecture presets and YAML loading, problems and model layer tables."""

import pytest

from perfcast.accel import (
    arch_names,
    conv_problem,
    gemm_problem,
    get_arch,
    load_arch_yaml,
    model_problems,
)
from perfcast.errors import InputError
from perfcast.ops import cnn_ops


def test_presets_load_and_eyeriss_like_has_168_pes_with_the_csv_energies():
    assert {"eyeriss-like", "tutorial-1level", "tutorial-3level"} <= set(arch_names())
    arch = get_arch("eyeriss-like")
    assert arch.num_pes == 168 and arch.technology == "65nm"
    glb = arch.levels[arch.level_index("shared_glb")]
    assert (glb.read_energy_pj, glb.write_energy_pj) == (18.183829, 14.137929)
    assert arch.mac_energy_pj == 0.207692


def test_unknown_arch_suggests_close_matches():
    with pytest.raises(InputError, match="eyeriss-like"):
        get_arch("eyriss-like")


def test_yaml_validation_names_the_field(tmp_path):
    good = get_arch("tutorial-2level").model_dump()
    path = tmp_path / "a.yaml"
    import yaml

    path.write_text(yaml.safe_dump(good))
    assert load_arch_yaml(path) == get_arch("tutorial-2level")
    good["levels"][1]["keeps"] = ["Weights", "Psums"]
    path.write_text(yaml.safe_dump(good))
    with pytest.raises(InputError, match="Psums"):
        load_arch_yaml(path)
    good["levels"][1]["keeps"] = ["Weights"]
    good["levels"][0]["keeps"] = ["Weights"]
    path.write_text(yaml.safe_dump(good))
    with pytest.raises(InputError, match="every tensor"):
        load_arch_yaml(path)
    path.write_text("- not a mapping\n")
    with pytest.raises(InputError):
        load_arch_yaml(path)
    with pytest.raises(InputError, match="no file at"):
        load_arch_yaml(tmp_path / "missing.yaml")
    path.write_text("levels: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML at line"):
        load_arch_yaml(path)
    path.write_text("x: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_arch_yaml(path)


def test_problem_shapes_and_errors():
    c = conv_problem("c", c=64, m=128, r=3, h=56, stride=2, padding=1)
    assert (c.dims["P"], c.dims["Q"]) == (28, 28)
    assert c.size_words("Inputs") == 64 * 57 * 57  # (28-1)*2 + 3
    g = gemm_problem("g", m=8, n=16, k=32)
    assert g.macs == 8 * 16 * 32 and g.size_words("Weights") == 16 * 32
    dw = conv_problem("dw", c=1, m=32, r=3, p=8, depthwise=True)
    assert dw.size_words("Inputs") == 32 * 10 * 10 and dw.size_words("Weights") == 32 * 9
    with pytest.raises(InputError, match="dims"):
        conv_problem("bad", c=0, m=4, r=1, p=4)


def test_resnet50_layers_match_the_ops_layer():
    problems = model_problems("resnet50")
    convs = [p for p in problems if p.name != "fc"]
    assert len(convs) == 53
    ops = cnn_ops("resnet50", 1)
    conv = ops[ops["op"] == "conv"]
    assert sum(p.macs for p in convs) == int((conv["flops"] * conv["count"]).sum() / 2)
    assert model_problems("resnet50", layer="conv1")[0].dims["P"] == 112


@pytest.mark.parametrize("name,gmacs", [("vgg16", 15.47), ("mobilenet", 0.569)])
def test_other_models(name, gmacs):
    total = sum(p.macs * p.count for p in model_problems(name))
    assert total / 1e9 == pytest.approx(gmacs, rel=2e-3)


def test_unknown_model_or_layer_suggests_close_matches():
    with pytest.raises(InputError, match="resnet50"):
        model_problems("resnet5O")
    with pytest.raises(InputError, match="conv1"):
        model_problems("resnet50", layer="conv_1")


def test_bandwidth_bound_cycles_use_the_slowest_port():
    from perfcast.accel import Mapping, Problem, evaluate_mapping

    base = get_arch("tutorial-2level")
    main = base.levels[0].model_copy(update={"read_bandwidth_words_per_cycle": 0.25,
                                             "write_bandwidth_words_per_cycle": 0.1})
    arch = base.model_copy(update={"levels": (main, base.levels[1])})
    problem = Problem(name="conv1d", dims={"R": 3, "P": 16})
    mapping = Mapping.from_timeloop(arch, [
        {"target": "Buffer", "factors": "R=3 P=16", "permutation": "RP"}])
    res = evaluate_mapping(arch, problem, mapping)
    # MainMemory: 3 + 18 reads at 0.25/cycle = 84 cycles; 16 updates at 0.1/cycle = 160
    assert (res.compute_cycles, res.cycles, res.bound_by) == (48, 160, "MainMemory")
    assert res.utilization == 48 / 160
