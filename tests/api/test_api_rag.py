"""`perfcast.api` for `rag`: the payload is what `perfcast rag --json` prints, the request's
defaults are the CLI's, and bad input is an InputError naming the option."""

import json

import pytest
from typer.testing import CliRunner

from perfcast.api import RagRequest, RagResult, resolve, run
from perfcast.cli import app
from perfcast.errors import InputError


def _cli(*args: str) -> dict:
    res = CliRunner().invoke(app, ["rag", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_payload_is_what_the_cli_prints():
    request = RagRequest.from_options(gpu="h100-sxm", index="ivf-pq", index_vectors=1_000_000,
                                      nlist=4096, nprobe=16, output_tokens=16,
                                      search_device="cpu", host="none",
                                      kernel_model="roofline")
    printed = _cli("--gpu", "h100-sxm", "--index", "ivf-pq", "--index-vectors", "1000000",
                   "--nlist", "4096", "--nprobe", "16", "--output-tokens", "16",
                   "--search-device", "cpu", "--host", "none", "--kernel-model", "roofline")
    assert json.loads(json.dumps(run(request).payload())) == printed


def test_defaults_give_the_cli_number():
    """Llama-3-8B and bge-large, a flat 10M-vector index on the GPU, calibrated kernels."""
    result = run(RagRequest(hardware="h100-sxm"))
    assert isinstance(result, RagResult)
    printed = _cli("--gpu", "h100-sxm")
    assert result.forecast.e2e_s == printed["e2e_s"]
    assert printed["inputs"]["index"]["kind"] == "flat" and printed["inputs"]["tp"] == 1


def test_resolve_picks_the_index_width_and_search_machines():
    resolved = resolve(RagRequest(hardware="h100-sxm", search={"search_device": "cpu"}))
    assert resolved.index.dim == resolved.embedder.hidden_size == 1024
    assert resolved.search_machines.device.kind == "cpu" and resolved.plan.tp == 1


@pytest.mark.parametrize("options, field", [
    ({"index": "hnsw"}, "index"), ({"search_device": "tpu"}, "search_device"),
    ({"search_device": "cpu", "cpu": "h100-sxm"}, "cpu"), ({"gpu": None}, "gpu")])
def test_bad_input_names_the_option(options, field):
    with pytest.raises(InputError) as err:
        run(RagRequest.from_options({"gpu": "h100-sxm", **options}))
    assert err.value.field == field
