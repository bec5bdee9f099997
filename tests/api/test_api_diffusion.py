"""`perfcast.api` for `diffusion`: the payload is what `perfcast diffusion --json` prints and
the request's defaults are the CLI's."""

import json

import pytest
from typer.testing import CliRunner

from perfcast.api import DiffusionRequest, DiffusionResult, resolve, run
from perfcast.cli import app
from perfcast.errors import InputError


def _cli(*args: str) -> dict:
    res = CliRunner().invoke(app, ["diffusion", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_payload_is_what_the_cli_prints():
    request = DiffusionRequest.from_options(gpu="h100-sxm", steps=4, height=768, width=1024,
                                            batch=2, guidance=False, negative_prompt=True,
                                            dtype="bf16", kernel_model="roofline")
    printed = _cli("--gpu", "h100-sxm", "--steps", "4", "--height", "768", "--width", "1024",
                   "--batch", "2", "--no-guidance", "--negative-prompt", "--dtype", "bf16",
                   "--kernel-model", "roofline")
    assert json.loads(json.dumps(run(request).payload())) == printed


def test_defaults_give_the_cli_number():
    """SDXL, 30 steps at 1024 px, calibrated kernels, eager: one latency both ways."""
    result = run(DiffusionRequest(gpu="a100-sxm4-80gb"))
    assert isinstance(result, DiffusionResult)
    printed = _cli("--gpu", "a100-sxm4-80gb")
    assert result.forecast.latency_s == printed["latency_s"]
    assert printed["inputs"]["kernel_model"]["name"] == "calibrated"


def test_resolve_picks_the_image_size():
    resolved = resolve(DiffusionRequest(gpu="a100-sxm4-80gb", image={"height": 512}))
    assert resolved.size == (512, 1024) and resolved.kernel_info["name"] == "calibrated"


def test_a_gpu_is_needed():
    with pytest.raises(InputError) as err:
        run(DiffusionRequest())
    assert err.value.field == "gpu" and "give --gpu" in str(err.value)
