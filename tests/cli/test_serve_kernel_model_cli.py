"""`perfcast serve --kernel-model`: calibrated (the default, output unchanged) or learned
(issue 18's trees over the physical model); the roofline is refused for serving, also when
`perfcast capacity` passes it to its probes with --set."""

import json

from typer.testing import CliRunner

from perfcast.cli import app

runner = CliRunner()
RUN = ["serve", "--model", "llama-2-7b", "--gpu", "h100-sxm", "--qps", "4",
       "--num-requests", "40", "--json"]


def _serve(*extra: str) -> dict:
    res = runner.invoke(app, [*RUN, *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_calibrated_is_the_default_and_learned_prices_differently():
    default, calibrated, learned = _serve(), _serve("--kernel-model", "calibrated"), \
        _serve("--kernel-model", "learned")
    assert default == calibrated
    assert default["inputs"]["kernel_model"]["name"] == "calibrated"
    assert "learned_envelope" not in default["inputs"]["kernel_model"]
    km = learned["inputs"]["kernel_model"]
    assert km["name"] == "learned" and km["stack"] == "trtllm"
    assert km["learned_envelope"]["gemm"] == "learned"  # H100 is inside the trees' envelope
    assert learned["tpot_s"]["mean"] != calibrated["tpot_s"]["mean"]
    assert abs(learned["tpot_s"]["mean"] / calibrated["tpot_s"]["mean"] - 1) < 0.5


def test_roofline_and_unknown_models_are_refused_naming_the_field():
    for name in ("roofline", "physics"):
        res = runner.invoke(app, [*RUN, "--kernel-model", name])
        assert res.exit_code == 2, res.output
        assert "kernel_model" in res.stderr and "calibrated, learned" in res.stderr
        assert "Traceback" not in res.output
    res = runner.invoke(app, ["capacity", "--model", "llama-2-7b", "--gpu", "h100-sxm",
                              "--tp", "1", "--set", "kernel_model=roofline"])
    assert res.exit_code == 2 and "set.kernel_model" in res.stderr, res.output


def test_help_lists_the_option_in_the_engine_panel():
    res = runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "100"})
    assert res.exit_code == 0
    engine = res.stdout.split("Engine")[1]
    assert "--kernel-model" in engine and "learned" in engine
