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
