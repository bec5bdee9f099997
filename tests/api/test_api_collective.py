"""`perfcast.api` for `collective`: the payload is what `perfcast collective --json` prints,
the request's defaults are the CLI's, and bad input is an InputError naming the option."""

import json

import pytest
from typer.testing import CliRunner

from perfcast.api import (
    CollectiveRequest,
    CollectiveResult,
    dump_request,
    load_request,
    resolve,
    run,
)
from perfcast.cli import app
from perfcast.errors import InputError


def _cli(*args: str) -> dict:
    res = CliRunner().invoke(app, ["collective", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _same(payload: dict) -> dict:
    return json.loads(json.dumps(payload))


def test_payload_is_what_the_cli_prints():
    request = CollectiveRequest.from_options(op="allgather", num_gpus=16, bytes="64MiB",
                                             cluster="dgx-h100", nodes=2, algorithm="ring")
    printed = _cli("--op", "allgather", "--num-gpus", "16", "--bytes", "64MiB", "--cluster",
                   "dgx-h100", "--nodes", "2", "--algorithm", "ring")
    assert _same(run(request).payload()) == printed


def test_defaults_give_the_cli_number():
    """Only the required options given: the same algorithm, nodes and time both ways."""
    request = CollectiveRequest(op="allreduce", num_gpus=8, bytes="1GB", hardware="h100-sxm")
    result = run(request)
    assert isinstance(result, CollectiveResult)
    printed = _cli("--op", "allreduce", "--num-gpus", "8", "--bytes", "1GB", "--gpu",
                   "h100-sxm")
    assert result.time_s == printed["time_s"] and result.algorithm == printed["algorithm"]
    assert request.algorithm == "auto" and request.hardware.nodes is None


def test_result_keeps_every_algorithm_time():
    result = run(CollectiveRequest(op="allreduce", num_gpus=16, bytes="1GiB",
                                   hardware={"cluster": "dgx-h100"}))
    chosen = result.algorithm_times_s[result.algorithm]
    assert chosen == pytest.approx(result.time_s)
    assert result.busbw_gbps == pytest.approx(result.algbw_gbps * 2 * 15 / 16)


def test_resolve_parses_the_size_and_spreads_the_nodes():
    resolved = resolve(CollectiveRequest(op="sendrecv", num_gpus=2, bytes="1.5 GiB",
                                         hardware={"gpu": "h100-sxm", "nodes": 2}))
    assert resolved.size_bytes == 1.5 * 2**30
    assert resolved.machines.num_nodes == 2 and resolved.machines.gpus_per_node == 1


@pytest.mark.parametrize("options, field, text", [
    ({"op": "allredcue", "gpu": "h100-sxm"}, "op", "did you mean allreduce"),
    ({"op": "allreduce", "cluster": "dgx-h10"}, "cluster", "did you mean dgx-h100"),
    ({"op": "allreduce"}, "gpu", "exactly one of --gpu and --cluster"),
    ({"op": "allreduce", "gpu": "h100-sxm", "nodes": 3}, "nodes", "do not split evenly"),
    ({"op": "allreduce", "gpu": "h100-sxm", "bytes": "12 parsecs"}, "bytes", "cannot read"),
    ({"op": "allgather", "gpu": "h100-sxm", "algorithm": "tree"}, "algorithm",
     "tree does not price"),
    ({"op": "allreduce", "cluster": "dgx-a100", "nodes": 2, "sendrecv_gbps": 7.8},
     "sendrecv_latency_us", "needs both"),
    ({"op": "allreduce", "cluster": "dgx-a100", "nodes": 2, "sendrecv_latency_us": 3,
      "sendrecv_gbps": 7.8}, "sendrecv_latency_us", "cannot be negative"),
    ({"op": "allreduce", "cluster": "dgx-a100", "nodes": 2, "sendrecv_latency_us": 30,
      "sendrecv_gbps": 70}, "sendrecv_gbps", "outrun its adapter"),
    ({"op": "allreduce", "cluster": "dgx-a100", "gpus_per_nic": 2}, "gpus_per_nic",
     "never crossed"),
    ({"op": "allreduce", "cluster": "dgx-a100", "sharp": True}, "sharp", "never crossed"),
    ({"op": "allreduce", "cluster": "pcie-a100-40gb-x4", "num_gpus": 4, "nodes": 1,
      "sendrecv_latency_us": 30, "sendrecv_gbps": 7.8}, "sendrecv_latency_us",
     "never crossed"),
])
def test_bad_input_names_the_option(options, field, text):
    with pytest.raises(InputError) as err:
        run(CollectiveRequest.from_options({"num_gpus": 8, "bytes": "1MB", **options}))
    assert err.value.field == field and text in str(err.value)


def test_request_dumps_and_loads_with_the_option_names():
    request = CollectiveRequest(op="allreduce", num_gpus=8, bytes="1GB", hardware="h100-sxm")
    data = dump_request(request)
    assert data["bytes"] == "1GB" and "message" not in data
    assert load_request(data) == request
    assert load_request({"command": "collective", **request.options()}) == request


@pytest.mark.parametrize("spelling, op", [
    ("all_reduce", "allreduce"), ("all-reduce", "allreduce"), ("all_reduce_perf", "allreduce"),
    ("AllGather", "allgather"), ("reduce_scatter", "reducescatter"), ("all_to_all", "alltoall"),
])
def test_torch_and_nccl_tests_spellings_name_the_same_collective(spelling, op):
    options = {"num_gpus": 8, "bytes": "64MB", "gpu": "h100-sxm"}
    request = CollectiveRequest.from_options({"op": spelling, **options})
    assert request.op == op
    assert run(request).payload() == run(CollectiveRequest.from_options(
        {"op": op, **options})).payload()


def test_a_misspelt_collective_is_still_refused():
    with pytest.raises(InputError, match="unknown collective 'allreducee'"):
        run(CollectiveRequest.from_options({"op": "allreducee", "num_gpus": 8,
                                            "bytes": "64MB", "gpu": "h100-sxm"}))


def test_the_network_measured_by_send_recv_is_what_a_two_node_send_recv_gives_back():
    """--sendrecv-latency-us / --sendrecv-gbps describe the network; a 2-node send/recv
    priced on it takes that latency at 1 byte and runs at that rate for large messages, and
    the payload says which network was priced."""
    given = {"cluster": "dgx-a100", "nodes": 2, "sendrecv_latency_us": 29.0,
             "sendrecv_gbps": 7.8}
    tiny = run(CollectiveRequest.from_options(op="sendrecv", num_gpus=2, bytes="1", **given))
    assert tiny.time_s == pytest.approx(29e-6, rel=1e-3)
    big = run(CollectiveRequest.from_options(op="sendrecv", num_gpus=2, bytes="8GB", **given))
    assert big.algbw_gbps == pytest.approx(7.8, rel=1e-3)
    net = big.payload()["network"]
    assert net["stream_gbps"] == 7.8 and net["adapter_gbps"] == 25.0
    assert net["hop_latency_us"] > 0 and net["gpus_per_nic"] == 1
    shared = run(CollectiveRequest.from_options(op="allreduce", num_gpus=16, bytes="1GB",
                                                gpus_per_nic=8, **given))
    alone = run(CollectiveRequest.from_options(op="allreduce", num_gpus=16, bytes="1GB",
                                               **given))
    assert shared.payload()["network"]["gpus_per_nic"] == 8
    assert shared.time_s > alone.time_s  # 8 streams share one 25 GB/s adapter
