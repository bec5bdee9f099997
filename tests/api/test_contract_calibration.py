"""Issue 16: a `--calibration` file fitted on other devices changes nothing on the target,
so it is refused (naming both) instead of being reported as used."""

from typer.testing import CliRunner

from perfcast.cli import app
from perfcast.kernels import Calibration, shipped_calibration

runner = CliRunner()


def _calibration_for(path, device: str):
    base = shipped_calibration()
    own = Calibration(base.families, base.residuals, {device: {}}, {"device": device})
    path.write_text(own.to_json())
    return str(path)


def test_a_calibration_for_another_device_is_refused(tmp_path):
    cal = _calibration_for(tmp_path / "a100.json", "a100-sxm4-80gb")
    res = runner.invoke(app, ["infer", "--model", "llama-2-7b", "--gpu", "h100-sxm",
                              "--calibration", cal, "--json"])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert text.startswith("error: calibration:")
    assert "a100-sxm4-80gb" in text and "not for h100-sxm" in text


def test_a_calibration_for_the_target_is_used(tmp_path):
    cal = _calibration_for(tmp_path / "h100.json", "h100-sxm")
    res = runner.invoke(app, ["infer", "--model", "llama-2-7b", "--gpu", "h100-sxm",
                              "--calibration", cal, "--json"])
    assert res.exit_code == 0, res.output
    assert '"calibration": "' + cal in res.stdout
