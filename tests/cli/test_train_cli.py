import json

from typer.testing import CliRunner

from perfcast.cli import app

runner = CliRunner()


def _run(*args):
    return runner.invoke(app, ["train", *args])


def test_train_json_has_the_promised_keys():
    res = _run("--model", "llama-2-7b", "--cluster", "dgx-a100", "--num-gpus", "16",
               "--zero", "3", "--seq-len", "4096", "--global-batch", "256", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    for key in ("iteration_time_s", "tokens_per_s", "tflops_per_gpu", "mfu",
                "memory_per_gpu_bytes", "breakdown", "memory", "flop_convention"):
        assert key in out
    b = out["breakdown"]
    assert {"compute_s", "bubble_s", "optimizer_s", "comm_total_s",
            "exposed_comm.zero_allgather_s", "exposed_comm.dp_allreduce_s"} <= set(b)
    assert out["inputs"]["dp"] == 16 and out["inputs"]["zero_stage"] == 3


def test_every_parallelism_flag_reaches_the_plan():
    res = _run("--model", "llama-2-70b", "--gpu", "h100-sxm", "--num-gpus", "64", "--tp", "8",
               "--pp", "4", "--cp", "2", "--sp", "--zero", "1", "--schedule",
               "interleaved-1f1b", "--virtual-stages", "2", "--micro-batch", "1",
               "--global-batch", "16", "--seq-len", "4096", "--recompute", "full",
               "--dtype", "fp8", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["inputs"]["dp"], out["inputs"]["cp"], out["inputs"]["virtual_stages"]) == (1, 2, 2)
    assert out["bubble_fraction"] > 0 and out["hfu"] > out["mfu"]


def test_plan_that_does_not_fit_is_an_error_naming_memory():
    res = _run("--model", "llama-2-70b", "--gpu", "a100-sxm4-80gb", "--num-gpus", "8",
               "--seq-len", "4096")
    assert res.exit_code == 2
    assert "memory" in res.stderr and "GB per GPU" in res.stderr
    assert "gives the allocator 85.2 GB" in res.stderr  # A100 80GB: 81,920 MiB less the gap


def test_bad_flags_exit_two_with_the_field():
    for args, field in ((["--recompute", "half"], "recompute"), (["--schedule", "zb"], "schedule"),
                        (["--num-gpus", "12", "--tp", "8"], "num_gpus"),
                        (["--global-batch", "3", "--num-gpus", "2"], "global_batch"),
                        (["--dtype", "int4"], "dtype")):
        res = _run("--model", "gpt2", "--gpu", "a100-sxm4-80gb", *args)
        assert res.exit_code == 2, (args, res.output)
        assert field in res.stderr


def test_sweep_prints_fitting_plans():
    res = _run("--model", "llama-2-7b", "--gpu", "h100-sxm", "--num-gpus", "16", "--sweep",
               "--seq-len", "2048", "--global-batch", "32", "--top", "3", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["plans_searched"] > 100 and len(out["top"]) == 3
    speeds = [p["tokens_per_s"] for p in out["top"]]
    assert speeds == sorted(speeds, reverse=True) and all(p["fits"] for p in out["top"])


def test_rlhf_step_and_tables():
    res = _run("--model", "llama-3-8b", "--gpu", "h100-sxm", "--num-gpus", "8", "--zero", "3",
               "--rlhf", "--seq-len", "512", "--response-tokens", "256", "--global-batch", "64",
               "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert 0 < out["generation_share"] < 1 and out["step_s"] > out["generation_s"]
    table = _run("--model", "gpt2-medium", "--gpu", "a100-sxm4-80gb", "--num-gpus", "8",
                 "--seq-len", "1024", "--micro-batch", "8", "--global-batch", "64")
    assert table.exit_code == 0 and "MFU" in table.stdout and "activations" in table.stdout


def test_stack_profile_is_recorded_and_slows_the_forecast():
    args = ("--model", "llama-2-7b", "--gpu", "h100-sxm", "--num-gpus", "8", "--zero", "3",
            "--seq-len", "4096", "--global-batch", "16", "--json")
    plain, stacked = _run(*args), _run(*args, "--stack", "llm-foundry")
    assert plain.exit_code == 0 and stacked.exit_code == 0, stacked.output
    plain, stacked = json.loads(plain.stdout), json.loads(stacked.stdout)
    assert stacked["inputs"]["kernel_model"]["stack"] == "llm-foundry"
    assert plain["inputs"]["kernel_model"]["stack"] == "megatron-core"
    assert stacked["tokens_per_s"] < plain["tokens_per_s"]


def test_stack_profile_errors_name_the_field():
    for extra in (["--stack", "llm-foundry", "--kernel-model", "roofline"],
                  ["--stack", "llm-foundry", "--gpu", "b200-sxm"], ["--stack", "deepspeed"]):
        args = ["--model", "gpt2", "--num-gpus", "1", *extra]
        if "--gpu" not in extra:
            args += ["--gpu", "h100-sxm"]
        res = _run(*args)
        assert res.exit_code == 2, (extra, res.output)
        assert "stack" in res.stderr
