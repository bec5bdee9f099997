"""`perfcast.measure` model steps: the plan of a model's own kernels and steps, the steps
timed end to end, the steps file read back, and the hand-written GPT-2's cache paths.

Plans are deterministic and checked exactly (kernel counts equal perfcast's op tables, conv
shapes equal the torch model's own convs); timings only for shape and sign. A tiny GPT-2
config keeps every timed run well under a second; the CUDA path runs through a fake device
(CPU tensors, a counting synchronise). Skipped without torch."""

import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import perfcast.measure._model_steps as model_steps  # noqa: E402
from perfcast.errors import InputError  # noqa: E402
from perfcast.measure import (  # noqa: E402
    TORCH_OPS,
    load_steps,
    plan_model_steps,
    run_model_steps,
)
from perfcast.measure import torch_models as tm  # noqa: E402
from perfcast.ops import cnn_ops, eager_ops  # noqa: E402
from perfcast.specs import Precision, get_model, load_model_config  # noqa: E402

ARITY = {"linear": 3, "bmm": 4, "conv": 6, "sdpa": 4}
TINY = {"n_layer": 2, "n_embd": 64, "n_head": 2, "vocab_size": 500, "n_positions": 64,
        "n_ctx": 64, "bos_token_id": 0, "eos_token_id": 0}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    """A two-layer GPT-2 config.json (the catalog's gpt2, narrowed)."""
    path = tmp_path_factory.mktemp("tiny") / "config.json"
    path.write_text(json.dumps({**load_model_config("gpt2"), **TINY}))
    return str(path)


def _ops(table) -> Counter:
    """Kernel launches per eager-vocabulary op of an op table."""
    out: Counter = Counter()
    for op, count in zip(table["op"], table["count"], strict=True):
        out[op.split(":")[0]] += int(count)
    return out


# ---------------------------------------------------------------- the plan


@pytest.mark.parametrize("stack, attention", [("hf-transformers", "sdpa"),
                                              ("hf-transformers-legacy", "eager")])
def test_plan_counts_the_op_tables_kernels_and_times_their_shapes(stack, attention):
    plan = plan_model_steps("gpt2", stack, seq_len=16, context=24, runners=["perfcast"])
    assert plan.attention == attention and plan.context == 24 and plan.dtype == "fp32"
    assert plan.cases == tuple(("perfcast", m) for m in ("forward", "decode", "training"))
    fp32, spec = Precision.uniform("fp32"), get_model("gpt2")
    forward = eager_ops(spec, 1, 16, precision=fp32, attention=attention)
    decode = eager_ops(spec, 1, 1, "decode", fp32, attention=attention, context=24)
    assert plan.kernels["forward"] == forward["count"].sum()
    assert plan.kernels["decode"] == decode["count"].sum()
    assert plan.kernels["training"] > plan.kernels["forward"]
    for op, shapes in plan.shapes.items():
        assert op in TORCH_OPS and shapes and len(set(shapes)) == len(shapes)
        assert all(len(s) == ARITY.get(op, 2) and min(s) >= 1 for s in shapes)
    assert (16, 50257, 768) in plan.shapes["linear"] and (1, 50257, 768) in plan.shapes["linear"]
    # every kernel of the steps is timed: SDPA, dropout, reductions, fills and Adam too
    assert plan.skipped_ops == () and ("sdpa" in plan.shapes) == (attention == "sdpa")
    assert plan.shapes["adam"] == [(min(124_439_808, 2**24), 1)] or \
        plan.shapes["adam"][0][0] <= 2**24  # Adam timed on a slice of the parameters
    for op, shapes in plan.shapes.items():  # enough shapes for calibrate's check
        assert len(shapes) >= 4 or op in ("adam", "fill", "linear", "bmm", "copy"), op


@settings(max_examples=8, deadline=None)
@given(batch=st.integers(1, 4))
def test_resnet_conv_shapes_are_the_torch_models_own(batch):
    plan = plan_model_steps("resnet18", batch=batch)
    net, _ = tm.resnet18_case(1)
    with torch.no_grad(), tm.trace_kernels() as trace:
        net(torch.randn(batch, 3, 224, 224))
    convs = {(a[0].shape[0], fn.in_channels, a[0].shape[-1], fn.out_channels,
              fn.kernel_size[0], fn.stride[0]): None for op, fn, a, _ in trace if op == "conv"}
    assert plan.shapes["conv"] == list(convs)
    assert plan.kernels == {"forward": int(cnn_ops("resnet18", batch)["count"].sum())}
    assert plan.cases == (("perfcast", "forward"),) and plan.seq_len is None


def test_the_plan_is_deterministic(tiny):
    first = plan_model_steps(None, model_config=tiny, seq_len=8, runners=["perfcast"])
    again = plan_model_steps(None, model_config=tiny, seq_len=8, runners=["perfcast"])
    assert first.shapes == again.shapes and first.kernels == again.kernels
    assert first.model.startswith("tiny")  # a config's label: its folder's name


@pytest.mark.parametrize("kwargs, field, text", [
    ({"model": "gpt2", "stack": "vllm"}, "stack", "cannot emulate vllm"),
    ({"model": "gpt2", "stack": "nope"}, "stack", ""),
    ({"model": "gpt2", "dtype": "bf16"}, "dtype", "not timed on cpu"),
    ({"model": "llama-2-7b"}, "model", "not llama-2-7b"),
    ({"model": "gpt2-large"}, "model", "too many to time on one CPU thread"),
    ({"model": "resnet50"}, "model", "no resnet50"),
    ({"model": "resnet18", "modes": ["decode"]}, "modes", "inference forward only"),
    ({"model": "resnet18", "runners": ["transformers"]}, "runner", "not ResNet-18"),
    ({"model": "gpt2", "modes": ["decod"]}, "modes", "unknown mode 'decod'; did you"),
    ({"model": "gpt2", "optimizer": "lion"}, "optimizer", "unknown"),
    ({"model": "gpt2", "context": 1024}, "context", "must be in [1, 1023]"),
    ({"model": "gpt2", "seq_len": 2000}, "seq_len", "must be in [1, 1024]"),
    ({"model": "gpt2", "device": "tpu"}, "device", "unknown"),
    ({"model": "gpt2", "context": 8, "modes": ["forward"]}, "context", "decode step"),
])
def test_what_the_harness_cannot_run_is_refused_by_name(kwargs, field, text):
    with pytest.raises(InputError) as err:
        plan_model_steps(**kwargs)
    assert err.value.field == field and text in str(err.value)
    if field == "model":
        assert "gpt2" in err.value.allowed and "resnet18" in err.value.allowed


def test_the_transformers_runner_needs_transformers(monkeypatch):
    real = model_steps.importlib.util.find_spec
    monkeypatch.setattr(model_steps.importlib.util, "find_spec",
                        lambda name, *a: None if name == "transformers" else real(name, *a))
    assert plan_model_steps("gpt2").cases[-1][0] == "perfcast"  # default: without it
    with pytest.raises(InputError, match="not installed") as err:
        plan_model_steps("gpt2", runners=["transformers"])
    assert err.value.field == "runner"


# ---------------------------------------------------------------- the hand-written GPT-2


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_gpt2_cache_paths_launch_the_op_tables_kernels(attention, tiny):
    cfg = tm.GPT2Config(**{k: TINY[k] for k in ("n_layer", "n_embd", "n_head",
                                                 "vocab_size", "n_positions")},
                        attention=attention)
    torch.manual_seed(0)
    net, spec = tm.GPT2(cfg).eval(), get_model(None, tiny)
    ids = torch.randint(0, 500, (2, 9))
    fp32 = Precision.uniform("fp32")
    with torch.no_grad():
        past = net.prefill(ids[:, :8])
        with tm.trace_kernels() as trace:
            decoded = net.decode(ids[:, 8:], past)
        full = net(ids)
    assert Counter(op for op, *_ in trace) == _ops(
        eager_ops(spec, 2, 1, "decode", fp32, attention=attention, context=8))
    assert Counter(tm.traced_ops(net, (ids,))) == _ops(
        eager_ops(spec, 2, 9, precision=fp32, attention=attention))
    assert torch.allclose(decoded[:, -1], full[:, -1], atol=1e-5)  # same token, same logits
    assert past[0][0].shape[-2] == 8  # decode left the cache as it was


# ---------------------------------------------------------------- timing and the file


@pytest.fixture(scope="module")
def measured(tiny):
    plan = plan_model_steps(None, model_config=tiny, seq_len=8, context=12,
                            runners=["perfcast"])
    calls: list[tuple[int, int]] = []
    steps = run_model_steps(plan, quick=True, repeats=1,
                            progress=lambda d, n: calls.append((d, n)))
    return plan, steps, calls


def test_every_step_is_timed_with_its_kernel_count(measured):
    plan, steps, calls = measured
    assert calls == [(1, 3), (2, 3), (3, 3)]
    assert [(s.mode, s.seq_len, s.context) for s in steps.steps] == [
        ("forward", 8, None), ("decode", 1, 12), ("training", 8, None)]
    for step in steps.steps:
        assert step.measured_s > 0 and step.kernels == plan.kernels[step.mode]
        assert step.runner == "perfcast" and step.repeats == 1
    assert steps.steps[2].optimizer == "adam" and steps.device == "local-cpu"
    assert steps.transformers is None and steps.torch == torch.__version__


def test_the_steps_file_round_trips_and_bad_fields_are_named(measured, tmp_path):
    _, steps, _ = measured
    path = tmp_path / "s.json"
    path.write_text(json.dumps(steps.to_json()))
    assert load_steps(path) == steps
    for change, field in ((lambda d: d["steps"][1].update(measured_s=-1.0), "steps.1.measured_s"),
                          (lambda d: d.update(schema_version=2), "schema_version"),
                          (lambda d: d["steps"][0].update(mode="prefill"), "steps.0.mode"),
                          (lambda d: d.pop("stack"), "stack"),
                          (lambda d: d.update(steps=[]), "steps")):
        data = steps.to_json()
        data = json.loads(json.dumps(data))
        change(data)
        path.write_text(json.dumps(data))
        with pytest.raises(InputError) as err:
            load_steps(path)
        assert err.value.field == field, (field, str(err.value))
    with pytest.raises(InputError) as err:
        load_steps(tmp_path / "missing.json")
    assert err.value.field == "steps"


def test_cuda_steps_end_in_a_synchronise_on_a_fake_device(tiny, monkeypatch):
    """The CUDA path on CPU tensors: every timed step (and the warm-up) synchronises."""
    plan = plan_model_steps(None, model_config=tiny, device="cuda", dtype="fp32", seq_len=4,
                            modes=["forward"], runners=["perfcast"])
    syncs = []
    monkeypatch.setattr(model_steps, "_device", lambda plan, torch: torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: syncs.append(1))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "Fake GPU")
    steps = run_model_steps(plan, repeats=3)
    assert len(syncs) == 1 + 3 and steps.device == "Fake GPU"
    assert steps.steps[0].quiet is None and steps.steps[0].measured_s > 0


def test_cuda_without_a_gpu_is_refused(tiny):
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    plan = plan_model_steps(None, model_config=tiny, device="cuda", seq_len=8,
                            runners=["perfcast"])
    assert plan.dtype == "bf16"
    with pytest.raises(InputError, match="no CUDA GPU") as err:
        run_model_steps(plan)
    assert err.value.field == "device"


def test_hf_transformers_runs_the_same_steps(tiny):
    """HF's own GPT-2 from the config (random weights), the stack's attention; the decode
    step leaves its cache at `context` tokens, so every repeat is the same step."""
    pytest.importorskip("transformers")
    plan = plan_model_steps(None, model_config=tiny, seq_len=8, context=12,
                            runners=["transformers"])
    steps = run_model_steps(plan, quick=True, repeats=2)
    assert [(s.runner, s.mode) for s in steps.steps] == list(plan.cases)
    assert all(s.measured_s > 0 for s in steps.steps) and steps.transformers


def test_cuda_plans_give_the_gpu_sweep_valid_shapes():
    """On cuda the kernels are also given as the CUDA sweep's kinds (SHAPE_FIELDS order),
    attention included: `kernel_cases` accepts every one of them."""
    import perfcast.measure as measure

    if not hasattr(measure, "kernel_cases"):
        pytest.skip("this tree's CUDA sweep takes no kind-keyed shapes")
    for model, stack in (("gpt2", "hf-transformers"), ("gpt2", "hf-transformers-legacy"),
                         ("resnet18", "hf-transformers")):
        plan = plan_model_steps(model, stack, device="cuda", batch=2, seq_len=32,
                                runners=["perfcast"])
        cases = measure.kernel_cases("cuda", shapes=plan.gpu_shapes, dtypes=["bf16"])
        assert {c.kind for c in cases} == set(plan.gpu_shapes)
    gpt2 = plan_model_steps("gpt2", device="cuda", seq_len=32, runners=["perfcast"])
    assert gpt2.gpu_shapes["attn_decode"] == [(1, 12, 12, 64, 33)]
    assert {"mulu", "tanh", "adam"} <= set(gpt2.skipped_ops) and "sdpa" not in gpt2.skipped_ops
    assert gpt2.kernel_shapes == sum(map(len, gpt2.gpu_shapes.values()))
    assert plan_model_steps("gpt2", seq_len=32).gpu_shapes is None
