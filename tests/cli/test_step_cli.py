import json

from typer.testing import CliRunner

from perfcast.cli import app

runner = CliRunner()


def _run(*args):
    return runner.invoke(app, ["step", *args])


def test_step_json_has_time_interval_and_breakdown():
    res = _run("--model", "gpt2-large", "--gpu", "v100-pcie-32gb", "--batch", "4",
               "--seq-len", "1024", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["inputs"]["kernel_model"]["tier"] == "target_measured"
    low, high = out["interval_s"]["low"], out["interval_s"]["high"]
    assert low < out["time_s"] < high
    assert out["breakdown"]["kernels_s"] > 0 and "family.gemm" in out["breakdown"]


def test_fused_training_and_parallel_variants(tmp_path):
    base = ["--model", "gpt2-large", "--gpu", "a100-sxm4-40gb", "--batch", "4", "--seq-len",
            "1024", "--mode", "training", "--json"]
    times = {}
    for name, extra in (("one", []), ("tp4", ["--tp", "4"]), ("dp4", ["--dp", "4"]),
                        ("pp4", ["--pp", "4"])):
        res = _run(*base, *extra)
        assert res.exit_code == 0, res.output
        times[name] = json.loads(res.stdout)["time_s"]
    assert times["tp4"] < times["one"] and times["dp4"] < times["one"] < times["pp4"]
    trace = tmp_path / "step.json"
    res = _run(*base, "--fused", "--trace", str(trace))
    assert res.exit_code == 0 and json.loads(trace.read_text())["traceEvents"]
    again = _run(*base, "--trace", str(trace))
    assert again.exit_code == 2 and "never overwrites" in again.stderr


def test_bad_inputs_are_one_line_errors():
    for args, field in ((["--model", "gpt2", "--mode", "backward"], "mode"),
                        (["--model", "gpt2", "--dp", "3", "--batch", "4"], "batch"),
                        (["--model", "gpt2", "--gpu", "z100"], "gpu"),
                        (["--model", "gpt2", "--num-gpus", "3", "--tp", "2"], "num_gpus")):
        res = _run(*args)
        assert res.exit_code == 2, (args, res.output)
        assert field in res.stderr and "Traceback" not in res.output
