import json

import pytest
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


def test_prefix_cache_flags_report_the_hit_ratio():
    base = ["serve", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--qps", "2",
            "--num-requests", "40", "--lengths", "uniform", "--prompt-tokens", "50,300",
            "--output-tokens", "20,100", "--system-prompt-tokens", "1024", "--json"]
    on = runner.invoke(app, [*base, "--prefix-cache"])
    off = runner.invoke(app, base)
    assert on.exit_code == 0 == off.exit_code, on.output + off.output
    d_on, d_off = json.loads(on.stdout), json.loads(off.stdout)
    assert 0.5 < d_on["prefix_hit_ratio"] < 1 and "prefix_hit_ratio" not in d_off
    assert d_on["ttft_s"]["mean"] < d_off["ttft_s"]["mean"]
    chat = runner.invoke(app, ["serve", "--qps", "1", "--num-requests", "6", "--turns", "3",
                               "--think-s", "2", "--prefix-cache", "--scheduler", "vllm-v1",
                               "--json"])
    assert chat.exit_code == 0, chat.output
    bad = runner.invoke(app, [*base, "--prefix-cache", "--scheduler", "orca"])
    assert bad.exit_code == 2 and "prefix_caching" in bad.stderr


def test_speculative_decoding_flags():
    base = ["serve", "--model", "llama-2-13b", "--gpu", "a100-sxm4-80gb", "--qps", "1",
            "--num-requests", "20", "--scheduler", "vllm-v1", "--json"]
    spec = runner.invoke(app, [*base, "--spec-k", "4", "--spec-draft-model", "llama-2-7b",
                               "--spec-acceptance", "0.9,0.8,0.7,0.6"])
    plain = runner.invoke(app, base)
    assert spec.exit_code == 0 == plain.exit_code, spec.output + plain.output
    d, p = json.loads(spec.stdout), json.loads(plain.stdout)
    expected = 1 + 0.9 + 0.9 * 0.8 + 0.9 * 0.8 * 0.7 + 0.9 * 0.8 * 0.7 * 0.6
    assert d["spec_expected_tokens_per_step"] == pytest.approx(expected)
    assert d["tpot_s"]["mean"] < p["tpot_s"]["mean"] and "spec_tokens_per_step" not in p
    bad = runner.invoke(app, [*base, "--spec-k", "2", "--spec-acceptance", "1.2"])
    assert bad.exit_code == 2 and "spec_acceptance" in bad.stderr


def test_disaggregated_pools_from_the_cli(tmp_path):
    out = tmp_path / "disagg.csv"
    res = runner.invoke(app, ["serve", "--scheduler", "vllm-v1", "--qps", "2",
                              "--num-requests", "20", "--disagg-prefill", "1x1",
                              "--disagg-decode", "1x1", "--ttft-slo", "1", "--tpot-slo", "0.1",
                              "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert {"ttft_s", "tpot_s", "e2e_s", "kv_transfer_s", "goodput_req_s", "prefill_pool",
            "decode_pool"} <= set(d)
    assert out.read_text().count("\n") == 21
    bad = runner.invoke(app, ["serve", "--qps", "1", "--disagg-prefill", "2",
                              "--disagg-decode", "1x1"])
    assert bad.exit_code == 2 and "disagg_prefill" in bad.stderr


def test_colocated_models_beside_their_dedicated_runs():
    res = runner.invoke(app, ["serve", "--model", "llama-2-7b", "--gpu", "h100-sxm",
                              "--scheduler", "vllm-v1", "--qps", "1", "--num-requests", "20",
                              "--colocate", "mistral-7b", "--colocate-sharing", "mps", "--json"])
    assert res.exit_code == 0, res.output
    models = json.loads(res.stdout)["models"]
    assert [m["model"] for m in models] == ["llama-2-7b", "mistral-7b"]
    for m in models:
        assert m["tpot_s"]["mean"] > m["dedicated"]["tpot_s"]["mean"]
        assert m["kv_blocks"] < m["dedicated"]["kv_blocks"]
    bad = runner.invoke(app, ["serve", "--qps", "1", "--colocate", "mistral-7b",
                              "--colocate-sharing", "mig"])
    assert bad.exit_code == 2 and "sharing" in bad.stderr


def test_kv_capacity_and_max_concurrency_at_the_workloads_length():
    """I3.1: 4K-token contexts in 16-token blocks take 256 blocks each."""
    res = runner.invoke(app, ["serve", "--model", "llama-2-7b", "--gpu", "a100-sxm4-40gb",
                              "--concurrency", "2", "--num-requests", "2", "--prompt-tokens",
                              "3584", "--output-tokens", "512", "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert s["kv_capacity_tokens"] == 16 * s["kv_blocks"]
    assert s["max_concurrent_seqs"] == s["kv_blocks"] // 256 > 0
