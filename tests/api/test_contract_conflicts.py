"""Issue 16: an option a mode does not read is refused with both options named, never
silently dropped (`serve --qps` beside `--concurrency`, `--prompt-tokens` with a trace)."""

import pytest
from typer.testing import CliRunner

import perfcast.api as api
from perfcast.cli import app
from perfcast.errors import InputError

runner = CliRunner()
TRAIN = {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb", "num_gpus": 8, "zero": 3}


def _refused(command: str, options: dict) -> InputError:
    with pytest.raises(InputError) as err:
        api.resolve(api.request_from_options(command, options))
    return err.value


def test_serve_qps_with_concurrency_names_both():
    res = runner.invoke(app, ["serve", "--qps", "4", "--concurrency", "8", "--num-requests",
                              "8", "--json"])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert "--qps and --concurrency: give one (open loop or closed loop)" in text


@pytest.mark.parametrize("lengths, source", [("trace", ["--trace", "arxiv"]),
                                             ("csv", ["--csv", "requests.csv"])])
@pytest.mark.parametrize("flag", ["--prompt-tokens", "--output-tokens"])
def test_serve_lengths_given_beside_a_recorded_source_are_refused(lengths, source, flag):
    res = runner.invoke(app, ["serve", "--qps", "1", "--num-requests", "4", "--lengths", lengths,
                              *source, flag, "2048"])
    assert res.exit_code == 2, res.output
    assert f"{flag} and --lengths {lengths}" in " ".join(res.output.split())


@pytest.mark.parametrize("options, field", [
    ({"qps": 1.0, "cv": 2.0}, "cv"),
    ({"qps": 1.0, "trace": "arxiv"}, "trace"),
    ({"qps": 1.0, "csv": "requests.csv"}, "csv"),
    ({"qps": 1.0, "prompt_groups": 4}, "prompt_groups"),
    ({"qps": 1.0, "think_s": 2.0}, "think_s"),
    ({"qps": 1.0, "colocate": ["llama-2-7b"], "disagg_prefill": "1x1",
      "disagg_decode": "1x1"}, "colocate"),
    ({"qps": 1.0, "colocate": ["llama-2-7b"], "out": "requests.csv"}, "out"),
    ({"qps": 1.0, "colocate_sharing": "mps"}, "colocate_sharing"),
    ({"qps": 1.0, "tp": 2, "disagg_prefill": "1x1", "disagg_decode": "1x1"}, "tp"),
    ({"qps": 1.0, "spec_acceptance": "0.9"}, "spec_acceptance"),
    ({"qps": 1.0, "spec_draft_gpu": "separate"}, "spec_draft_gpu"),
])
def test_serve_options_another_mode_reads_are_refused(options, field, tmp_path):
    assert _refused("serve", {"num_requests": 4, **options}).field == field


@pytest.mark.parametrize("options, field", [
    ({"top": 3}, "top"),
    ({"response_tokens": 64}, "response_tokens"),
    ({"generation_tp": 2}, "generation_tp"),
    ({"sweep": True, "tp": 2, "zero": 0}, "tp"),
    ({"sweep": True}, "zero"),
    ({"rlhf": True, "lora_rank": 8}, "lora_rank"),
])
def test_train_options_another_question_reads_are_refused(options, field):
    assert _refused("train", {**TRAIN, **options}).field == field


def test_a_resnet_refuses_the_sequence_length_it_would_ignore():
    err = _refused("train", {"model": "resnet50", "gpu": "a100-sxm4-80gb", "num_gpus": 8,
                             "seq_len": 4096})
    assert err.field == "seq_len"


def test_rag_and_diffusion_refuse_what_they_would_ignore_or_replace():
    assert _refused("rag", {"gpu": "h100-sxm", "nprobe": 20_000}).field == "nprobe"
    assert _refused("diffusion", {"gpu": "h100-sxm", "resolution": 512, "height": 768,
                                  "width": 768}).field == "resolution"


def test_the_modes_that_read_them_still_take_them():
    api.resolve(api.request_from_options("serve", {"arrival": "gamma", "qps": 1.0, "cv": 2.0,
                                                    "num_requests": 4}))
    api.resolve(api.request_from_options("serve", {"qps": 1.0, "lengths": "trace",
                                                    "trace": "arxiv", "num_requests": 4}))
    api.resolve(api.request_from_options("serve", {"concurrency": 2, "num_requests": 4}))
    api.resolve(api.request_from_options("train", {**TRAIN, "zero": 0, "sweep": True,
                                                    "top": 3}))


@pytest.mark.parametrize("resolution", ["1024", "512"])
def test_diffusion_resolution_beside_both_sides_is_refused_even_at_its_default(resolution):
    """--resolution 1024 is the default's value, yet given beside --height and --width it
    would be unread: refused naming both, like any other value."""
    res = runner.invoke(app, ["diffusion", "--gpu", "a100-sxm4-80gb", "--steps", "1",
                              "--resolution", resolution, "--height", "768", "--width", "512"])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert f"resolution: --resolution {resolution} with both --height 768 and --width 512" in text


def test_diffusion_one_side_takes_the_other_from_resolution_or_the_default():
    sized = {opts: api.resolve(api.request_from_options("diffusion", {
        "gpu": "a100-sxm4-80gb", **dict(opts)})).size
        for opts in ((("height", 768),), (("height", 768), ("resolution", 512)), ())}
    assert sized == {(("height", 768),): (768, 1024),
                     (("height", 768), ("resolution", 512)): (768, 512), (): (1024, 1024)}
