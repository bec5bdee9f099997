import json

import pytest
from typer.testing import CliRunner

from perfcast.api._collective import parse_bytes
from perfcast.cli import app
from perfcast.errors import InputError

runner = CliRunner()
KEYS = {"time_s", "algbw_gbps", "busbw_gbps", "algorithm", "op", "num_gpus", "nodes", "bytes",
        "cluster"}


def _run(*args):
    return runner.invoke(app, ["collective", *args])


def _json(*args):
    res = _run(*args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize("op,factor", [("allreduce", 1.75), ("allgather", 0.875),
                                       ("reducescatter", 0.875), ("alltoall", 0.875),
                                       ("broadcast", 1.0)])
def test_json_keys_and_nccl_bandwidth_conventions(op, factor):
    out = _json("--op", op, "--num-gpus", "8", "--bytes", "64MiB", "--cluster", "dgx-h100")
    assert set(out) >= KEYS
    assert out["bytes"] == 64 * 2**20 and out["nodes"] == 1 and out["cluster"] == "dgx-h100"
    assert out["algbw_gbps"] == pytest.approx(out["bytes"] / out["time_s"] / 1e9)
    assert out["busbw_gbps"] == pytest.approx(out["algbw_gbps"] * factor)


def test_gpu_nodes_and_algorithm_options():
    one = _json("--op", "allreduce", "--num-gpus", "8", "--bytes", "1e6", "--gpu", "h100-sxm")
    two = _json("--op", "allreduce", "--num-gpus", "8", "--nodes", "2", "--bytes", "1e6",
                "--gpu", "h100-sxm")
    assert one["algorithm"] == "ring" and two["nodes"] == 2 and two["time_s"] > one["time_s"]
    ring = _json("--op", "allreduce", "--num-gpus", "8", "--nodes", "2", "--bytes", "1e6",
                 "--gpu", "h100-sxm", "--algorithm", "ring")
    assert ring["algorithm"] == "ring" and ring["time_s"] >= two["time_s"]
    p2p = _json("--op", "sendrecv", "--num-gpus", "2", "--nodes", "2", "--bytes", "1GB",
                "--cluster", "dgx-a100")
    assert p2p["algorithm"] == "direct" and p2p["busbw_gbps"] == pytest.approx(
        p2p["algbw_gbps"]) and p2p["algbw_gbps"] < 25
    table = _run("--op", "allreduce", "--num-gpus", "16", "--bytes", "1GiB", "--cluster",
                 "dgx-h100")
    assert table.exit_code == 0 and "hierarchical" in table.stdout
    assert "network: 50.0 GB/s adapters (1 GPU(s) each)" in table.stdout
    measured = _run("--op", "allreduce", "--num-gpus", "16", "--bytes", "1GiB", "--cluster",
                    "dgx-a100", "--nodes", "2", "--sendrecv-latency-us", "29",
                    "--sendrecv-gbps", "7.8", "--gpus-per-nic", "8")
    assert measured.exit_code == 0, measured.output
    assert "(8 GPU(s) each), per-GPU stream 7.80 GB/s" in measured.stdout


@pytest.mark.parametrize("args,message", [
    (["--op", "allredcue", "--gpu", "h100-sxm"], "did you mean allreduce"),
    (["--op", "allreduce", "--cluster", "dgx-h10"], "did you mean dgx-h100"),
    (["--op", "allreduce", "--gpu", "h1OO"], "unknown gpu"),
    (["--op", "allreduce"], "exactly one of --gpu and --cluster"),
    (["--op", "allreduce", "--gpu", "h100-sxm", "--cluster", "dgx-h100"], "exactly one"),
    (["--op", "allreduce", "--gpu", "h100-sxm", "--nodes", "3"], "do not split evenly"),
    (["--op", "allreduce", "--gpu", "h100-sxm", "--nodes", "1", "--num-gpus", "16"],
     "a dgx-h100 node holds 8"),
    (["--op", "sendrecv", "--gpu", "h100-sxm"], "send/recv is between 2 GPUs"),
    (["--op", "allgather", "--gpu", "h100-sxm", "--algorithm", "tree"], "tree does not price"),
    (["--op", "allreduce", "--gpu", "a100-sxm4-80gb", "--algorithm", "nvls"],
     "nvls needs NVLink SHARP"),
    (["--op", "allreduce", "--gpu", "h100-sxm", "--bytes", "12 parsecs"], "cannot read"),
    (["--op", "allreduce", "--gpu", "h100-sxm", "--nodes", "2", "--sendrecv-gbps", "5"],
     "needs both"),
    (["--op", "allreduce", "--gpu", "h100-sxm", "--sharp"], "network is never crossed"),
])
def test_bad_input_is_one_line_and_exit_2(args, message):
    base = {"--num-gpus": "8", "--bytes": "1MB"}
    extra = [x for k, v in base.items() if k not in args for x in (k, v)]
    res = _run(*args, *extra)
    assert res.exit_code == 2, res.output
    assert message in res.stderr and "Traceback" not in res.output


def test_parse_bytes_forms():
    assert parse_bytes("1e6") == 1e6 and parse_bytes("4096") == 4096
    assert parse_bytes("64MiB") == 64 * 2**20 and parse_bytes("1GB") == 1e9
    assert parse_bytes("1.5 GiB") == 1.5 * 2**30 and parse_bytes("2kb") == 2000
    for bad in ("", "MiB", "-1", "0", "1e400", "3 furlongs"):
        with pytest.raises(InputError, match="bytes"):
            parse_bytes(bad)


def test_validate_collectives_json_rows_and_table7():
    res = runner.invoke(app, ["validate", "collectives", "--split", "fit", "--table7", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out["rows"][0]) == {"split", "device", "group", "method", "mape", "p90_ape", "n"}
    assert {r["split"] for r in out["rows"]} == {"fit"}
    assert {"measured_s", "forecast_s", "bytes", "collective"} <= set(out["table7"][0])
    bad = runner.invoke(app, ["validate", "collectives", "--split", "bogus"])
    assert bad.exit_code == 2 and "unknown split" in bad.stderr
