"""`perfcast validate all` runs every accuracy check (minutes; each is tested on its own):
here only that its output folder is checked before any check starts."""

from typer.testing import CliRunner

from perfcast.cli import app


def test_validate_all_refuses_a_file_as_out_and_keeps_it(tmp_path):
    mine = tmp_path / "report"
    mine.write_text("mine")
    res = CliRunner().invoke(app, ["validate", "all", "--out", str(mine)])
    assert res.exit_code == 2 and "out:" in res.stderr
    assert mine.read_text() == "mine"
