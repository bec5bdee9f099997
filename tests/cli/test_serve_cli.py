import json

from typer.testing import CliRunner

from perfcast.cli import app

runner = CliRunner()


def test_serve_json_has_the_documented_keys(tmp_path):
    out = tmp_path / "requests.csv"
    trace = tmp_path / "serve.json"
    res = runner.invoke(app, ["serve", "--model", "llama-2-7b", "--gpu", "a100-sxm4-80gb",
                              "--qps", "4", "--num-requests", "40", "--prompt-tokens", "512",
                              "--output-tokens", "64", "--ttft-slo", "0.5", "--tpot-slo",
                              "0.05", "--out", str(out), "--trace-out", str(trace), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    for key in ("ttft_s", "tpot_s", "e2e_s"):
        assert set(d[key]) >= {"mean", "p50", "p90", "p99"}
    for key in ("throughput_req_s", "throughput_tok_s", "preemptions", "kv_utilisation_mean",
                "goodput_req_s"):
        assert key in d
    assert out.read_text().count("\n") == 41 and json.loads(trace.read_text())["traceEvents"]
    again = runner.invoke(app, ["serve", "--qps", "1", "--num-requests", "2", "--out",
                                str(out)])
    assert again.exit_code == 2 and "never overwrites" in again.stderr


def test_closed_loop_and_distributions():
    res = runner.invoke(app, ["serve", "--concurrency", "8", "--num-requests", "24",
                              "--lengths", "uniform", "--prompt-tokens", "128,1024",
                              "--output-tokens", "16,128", "--scheduler", "sarathi",
                              "--chunk-size", "256", "--host-overlap", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["inputs"]["arrival"] == "closed_loop"


def test_bad_inputs_name_the_field():
    for args, field in ((["--scheduler", "vllm2", "--qps", "1"], "scheduler"),
                        (["--qps", "1", "--prompt-tokens", "abc"], "prompt_tokens"),
                        (["--qps", "1", "--ttft-slo", "1"], "ttft_slo"),
                        (["--model", "llama-7b", "--qps", "1"], "model")):
        res = runner.invoke(app, ["serve", "--num-requests", "2", *args])
        assert res.exit_code == 2, (args, res.output)
        assert field in res.stderr and "Traceback" not in res.output


def test_fused_activation_quant_is_the_serving_default():
    base = ["serve", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--dtype", "fp8",
            "--qps", "2", "--num-requests", "30", "--json"]
    fused = runner.invoke(app, base)
    separate = runner.invoke(app, [*base, "--activation-quant", "separate"])
    assert fused.exit_code == 0 == separate.exit_code, fused.output + separate.output
    tpot = [json.loads(r.stdout)["tpot_s"]["mean"] for r in (fused, separate)]
    assert tpot[0] < tpot[1]  # no per-GEMM quantisation kernels
    bad = runner.invoke(app, [*base, "--activation-quant", "static"])
    assert bad.exit_code == 2 and "activation_quant" in bad.stderr and "fused" in bad.stderr


def test_custom_all_reduce_is_the_tp_default():
    base = ["serve", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--tp", "4", "--dtype",
            "fp8", "--qps", "2", "--num-requests", "30", "--json"]
    custom, nccl = runner.invoke(app, base), runner.invoke(app, [*base, "--allreduce", "nccl"])
    assert custom.exit_code == 0 == nccl.exit_code, custom.output + nccl.output
    tpot = [json.loads(r.stdout)["tpot_s"]["mean"] for r in (custom, nccl)]
    assert tpot[0] < tpot[1]  # decode all-reduces are small: one-shot beats the ring
    bad = runner.invoke(app, [*base, "--allreduce", "ring"])
    assert bad.exit_code == 2 and "allreduce" in bad.stderr and "nccl" in bad.stderr
