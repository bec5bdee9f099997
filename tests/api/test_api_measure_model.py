"""`perfcast measure --model`: the request's model group is checked by name before any work,
the model's own kernels go to --out (store schema) and its whole steps to <out>.steps.json
(read back by `perfcast.measure.load_steps`), and the CLI prints the same payload.

Timings depend on this machine, so runs are compared on everything not timed. A tiny GPT-2
config keeps the API runs under a few seconds; the CLI run is GPT-2 small at 16 tokens,
forward and decode only, one repeat."""

import importlib.util
import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from perfcast.api import MeasureRequest, resolve, run
from perfcast.cli import app
from perfcast.errors import InputError
from perfcast.measure import check_measurements, load_steps
from perfcast.specs import load_model_config

torch = pytest.importorskip("torch")

TINY = {"n_layer": 2, "n_embd": 64, "n_head": 2, "vocab_size": 500, "n_positions": 64,
        "n_ctx": 64, "bos_token_id": 0, "eos_token_id": 0}
QUICK = {"quick": True, "repeats": 1, "runners": "perfcast"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("tiny") / "config.json"
    path.write_text(json.dumps({**load_model_config("gpt2"), **TINY}))
    return str(path)


@pytest.fixture(scope="module")
def measured(tiny, tmp_path_factory):
    """One run through `run`, with its progress calls."""
    out = tmp_path_factory.mktemp("m") / "k.csv"
    calls: list[tuple[int, int]] = []
    request = MeasureRequest.from_options(out=out, model_config=tiny, seq_len=8, context=8,
                                          **QUICK)
    result = run(request, progress=lambda d, n: calls.append((d, n)))
    return result, calls


def _refused(**options) -> InputError:
    with pytest.raises(InputError) as err:
        resolve(MeasureRequest.from_options(**{"out": "never.csv", **options}))
    return err.value


@pytest.mark.parametrize("options, field, text", [
    ({"batch": 2}, "batch", "only applies with --model"),
    ({"stack": "hf-transformers"}, "stack", "only applies with --model"),
    ({"model": "gpt2", "backend": "numpy"}, "backend", "torch kernels"),
    ({"model": "gpt2", "stack": "vllm"}, "stack", "cannot emulate vllm"),
    ({"model": "gpt2", "dtype": "bf16"}, "dtype", "not timed on cpu"),
    ({"model": "gpt2", "modes": "forward,prefill"}, "modes", "unknown mode 'prefill'"),
    ({"model": "gpt2", "runners": "vllm"}, "runner", "unknown runner"),
    ({"model": "llama-3-8b"}, "model", "GPT-2-type"),
    ({"model": "gpt2", "model_config": "x.json"}, "model", "exactly one"),
    ({"model": "resnet18", "seq_len": 64}, "seq_len", "is a CNN"),
    ({"model": "gpt2", "batch": 0}, "batch", "must be >= 1"),
    ({"model": "gpt2", "out": "m.txt"}, "out", "unknown file type"),
])
def test_invalid_model_options_are_refused_by_name(options, field, text):
    err = _refused(**options)
    assert err.field == field and text in str(err), str(err)


def test_a_model_the_harness_cannot_run_names_the_models_it_can():
    err = _refused(model="gpt2-xl")
    assert "gpt2-xl" in err.problem and "gpt2" in err.allowed and "resnet18" in err.allowed


def test_without_torch_the_error_says_how_to_get_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    err = _refused(model="gpt2")
    assert err.field == "model" and "perfcast[torch]" in err.allowed


def test_the_plan_is_deterministic(tiny):
    plans = [resolve(MeasureRequest.from_options(out="a.csv", model_config=tiny, seq_len=8,
                                                 seed=3)).plan for _ in range(2)]
    assert plans[0].shapes == plans[1].shapes and plans[0].cases == plans[1].cases


def test_kernels_and_steps_are_written(measured):
    result, calls = measured
    rows = pd.read_csv(result.path, keep_default_na=False)
    check_measurements(rows)
    assert len(rows) == sum(map(len, result.plan.shapes.values()))
    assert set(rows["op"]) == set(result.plan.shapes) and set(rows["timing"]) == {
        "cpu_wallclock"}
    assert result.steps_path == result.path.with_name("k.csv.steps.json")
    steps = load_steps(result.steps_path)
    assert steps == result.steps and steps.stack == "hf-transformers"
    assert [s.mode for s in steps.steps] == ["forward", "decode", "training"]
    assert result.device_spec.kernel_launch_overhead_s > 0  # torch's dispatch
    total = len(rows) + 3
    assert calls[-1] == (total, total) and [d for d, _ in calls] == list(range(1, total + 1))
    assert {n for _, n in calls} == {total}


def test_payload_lists_the_steps_and_skipped_ops(measured):
    payload = json.loads(json.dumps(measured[0].payload()))
    model = payload["model"]
    assert model["stack"] == "hf-transformers" and model["attention"] == "sdpa"
    assert model["skipped_ops"] == [] and model["kernel_shapes"] == payload["rows"]
    assert [(s["mode"], s["seq_len"], s["context"]) for s in model["steps"]] == [
        ("forward", 8, None), ("decode", 1, 8), ("training", 8, None)]
    assert payload["steps_path"].endswith("k.csv.steps.json")


def test_the_steps_file_is_never_overwritten_without_force(measured, tiny):
    result, _ = measured
    result.steps_path.with_name("new.csv.steps.json").write_text("{}")
    new = result.path.with_name("new.csv")
    err = _refused(out=str(new), model_config=tiny, seq_len=8)
    assert err.field == "out" and "--force" in str(err) and "steps.json" in str(err)
    forced = MeasureRequest.from_options(out=new, model_config=tiny, seq_len=8, force=True)
    assert resolve(forced).plan is not None


def test_cli_measures_gpt2_and_refuses_a_bad_option(tmp_path):
    out = tmp_path / "x.parquet"
    pytest.importorskip("pyarrow")
    res = CliRunner().invoke(app, [
        "measure", "--model", "gpt2", "--quick", "--out", str(out), "--seq-len", "16",
        "--modes", "forward,decode", "--runners", "perfcast", "--repeats", "1", "--json"])
    assert res.exit_code == 0, res.output
    printed = json.loads(res.stdout)
    assert [s["mode"] for s in printed["model"]["steps"]] == ["forward", "decode"]
    assert printed["rows"] == len(pd.read_parquet(out))
    assert load_steps(f"{out}.steps.json").model == "gpt2"
    bad = CliRunner().invoke(app, ["measure", "--model", "gpt2", "--stack", "sglang",
                                   "--out", str(tmp_path / "y.csv")])
    assert bad.exit_code == 2 and "stack:" in bad.output and "hf-transformers" in bad.output


def test_ctrl_c_in_the_steps_keeps_the_kernel_rows(tiny, tmp_path, monkeypatch):
    import perfcast.measure as measure_pkg  # what api._measure runs, looked up per run
    from perfcast.measure import SweepInterrupted

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(measure_pkg, "run_model_steps", stop)
    out = tmp_path / "k.csv"
    request = MeasureRequest.from_options(out=out, model_config=tiny, seq_len=8,
                                          modes="forward", **QUICK)
    with pytest.raises(SweepInterrupted) as err:
        run(request)
    assert err.value.path == out and len(pd.read_csv(out)) == len(err.value.rows) > 0
    assert not out.with_name("k.csv.steps.json").exists()


def test_cuda_model_run_on_a_fake_device(tiny, tmp_path, monkeypatch):
    """--device cuda --model: the CUDA sweep gets the model's kinds and shapes in the steps'
    dtype (no collectives), the steps run with synchronises, the device is the catalog's."""
    import perfcast.measure as measure_pkg  # what api._measure runs, looked up per run
    import perfcast.measure._model_steps as model_steps
    from perfcast.measure import STORE_COLUMNS

    seen = {}

    def sweep(**kwargs):
        seen.update(kwargs)
        row = dict.fromkeys(STORE_COLUMNS, 0.0) | {
            "source": "local", "source_file": "fake", "split": "", "device": "h100-sxm",
            "family": "gemm", "op": "linear", "dtype": "fp32", "weight_dtype": "fp32",
            "kv_dtype": "", "timing": "cuda_graph", "latency_s": 1e-5, "m": 8.0, "n": 8.0,
            "k": 8.0, "b": 1.0, "flops": 1024.0, "bytes": 768.0}
        return pd.DataFrame([row])

    monkeypatch.setattr(measure_pkg, "run_gpu_sweep", sweep)
    monkeypatch.setattr(measure_pkg, "measure_launch_s", lambda: 4e-6)  # the host's launch
    monkeypatch.setattr(model_steps, "_device", lambda plan, torch: torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "NVIDIA H100 80GB HBM3")
    out = tmp_path / "g.csv"
    result = run(MeasureRequest.from_options(
        out=out, device="cuda", model_config=tiny, seq_len=8, dtype="fp32", modes="forward",
        repeats=2, runners="perfcast"))
    assert seen["dtypes"] == ("fp32",) and seen["collectives"] is False
    assert seen["shapes"] == result.plan.gpu_shapes and "linear" in seen["shapes"]
    steps = load_steps(result.steps_path)
    assert steps.device == "h100-sxm" == result.device and steps.steps[0].quiet is None
