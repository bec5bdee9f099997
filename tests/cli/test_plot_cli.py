"""`perfcast plot KIND --out FILE`: each kind writes its figure; bad input is one line."""

import re

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from perfcast.cli import app

runner = CliRunner()
TRAIN = ["--model", "gpt2", "--gpu", "a100-sxm4-80gb", "--num-gpus", "4", "--pp", "2",
         "--global-batch", "8", "--seq-len", "512"]


def _plot(*args):
    return runner.invoke(app, ["plot", *map(str, args)])


def _wrote(res, path, kind="png"):
    assert res.exit_code == 0, res.output
    head = path.read_bytes()[:400]
    assert head.startswith(b"\x89PNG") if kind == "png" else b"<svg" in head


@pytest.mark.parametrize("args", [
    ("roofline", "--model", "gpt2", "--gpu", "a100-sxm4-80gb", "--batch", "2", "--seq-len",
     "256", "--mode", "training", "--dtype", "fp16"),
    ("roofline", "--model", "gpt2", "--gpu", "h100-sxm", "--mode", "decode", "--batch", "8"),
    ("breakdown", *TRAIN, "--vary", "schedule=gpipe,1f1b"),
    ("breakdown", "--workload", "infer", "--model", "gpt2", "--gpu", "a100-sxm4-80gb",
     "--output-tokens", "8"),
    ("memory", *TRAIN, "--vary", "pp=1,2", "--vary", "recompute=none,full"),
    ("memory", "--workload", "infer", "--model", "gpt2", "--gpu", "a100-sxm4-80gb"),
    ("pipeline", *TRAIN, "--schedule", "interleaved-1f1b", "--virtual-stages", "2"),
], ids=lambda a: "-".join(a[:1] + tuple(x for x in a if x in ("decode", "infer", "--vary"))))
def test_forecast_plots_write_a_png(tmp_path, args):
    out = tmp_path / "fig.png"
    _wrote(_plot(*args, "--out", out), out)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    root = tmp_path_factory.mktemp("tables")
    rng = np.random.default_rng(0)
    req = pd.DataFrame({"ttft_s": rng.gamma(2, 0.1, 40), "tpot_s": rng.gamma(2, 0.01, 40),
                        "e2e_s": rng.gamma(2, 1.0, 40)})
    req.to_csv(root / "run.csv", index=False)
    req.to_parquet(root / "run.parquet", index=False)
    sweep = pd.DataFrame({"gpu": ["a100"] * 3 + ["h100"] * 3, "qps": [1, 2, 4] * 2,
                          "throughput_tok_s": [10, 20, 35, 10, 20, 40],
                          "e2e_s.p50": [1, 1.2, 3, 0.8, 0.9, 1.5],
                          "e2e_s.p99": [2, 2.5, 6, 1.5, 1.8, 3],
                          "usd_per_mtok": [1, 1, 1.2, 2, 2, 2.1]})
    sweep.to_parquet(root / "sweep.parquet", index=False)
    return root


def test_table_plots_write_png_and_svg(tmp_path, tables):
    out = tmp_path / "cdf.svg"
    _wrote(_plot("cdf", "--requests", tables / "run.csv", "--requests",
                 tables / "run.parquet", "--metric", "ttft_s", "--metric", "e2e_s",
                 "--out", out), out, "svg")
    out = tmp_path / "tl.png"
    _wrote(_plot("throughput-latency", "--table", tables / "sweep.parquet", "--group", "gpu",
                 "--out", out), out)
    out = tmp_path / "pareto.png"
    _wrote(_plot("pareto", "--table", tables / "sweep.parquet", "--x", "usd_per_mtok",
                 "--y", "e2e_s.p99", "--label", "gpu", "--out", out), out)


@pytest.mark.parametrize("args, field", [
    (("memory", *TRAIN, "--out", "fig.pdf"), "out"),
    (("breakdown", *TRAIN, "--vary", "colour=red", "--out", "x.png"), "vary"),
    (("breakdown", *TRAIN, "--vary", "pp=two", "--out", "x.png"), "vary"),
    (("breakdown", *TRAIN, "--workload", "serve", "--out", "x.png"), "workload"),
    (("breakdown", *TRAIN, "--vary", "schedule=1f1b,gpipe tp=1", "--out", "x.png"), "vary"),
    (("roofline", "--model", "gpt2", "--gpu", "a100-sxm4-80gb", "--mode", "sideways",
      "--out", "x.png"), "mode"),
    (("pipeline", *TRAIN, "--schedule", "zigzag", "--out", "x.png"), "schedule"),
    (("cdf", "--requests", "missing.csv", "--out", "x.png"), "requests"),
    (("pareto", "--table", "t.json", "--x", "a", "--y", "b", "--out", "x.png"), "table"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, args, field):
    monkeypatch.chdir(tmp_path)
    res = _plot(*args)
    assert res.exit_code == 2, res.output
    assert res.output.startswith(f"error: {field}") and "Traceback" not in res.output


def test_missing_column_and_existing_file_are_refused(tmp_path, tables):
    res = _plot("pareto", "--table", tables / "sweep.parquet", "--x", "cost", "--y",
                "e2e_s.p99", "--out", tmp_path / "p.png")
    assert res.exit_code == 2 and res.output.startswith("error: x: no column 'cost'")
    assert "usd_per_mtok" in res.output  # the allowed columns are listed
    existing = tmp_path / "taken.png"
    existing.write_bytes(b"keep")
    res = _plot("cdf", "--requests", tables / "run.csv", "--out", existing)
    assert res.exit_code == 2 and existing.read_bytes() == b"keep"


def test_sweep_tables_resolve_out_and_in_columns(tmp_path):
    sweep = pd.DataFrame({"in.gpu": ["a", "a", "b", "b"], "in.qps": [2, 1, 1, 2],
                          "in.model": ["m"] * 4, "out.throughput_tok_s": [20, 10, 12, 25],
                          "out.e2e_s.p50": [2.0, 1.0, 0.5, 0.9],
                          "out.e2e_s.p99": [4.0, 2.0, 1.0, 1.8]})
    table = tmp_path / "results.parquet"
    sweep.to_parquet(table, index=False)
    out = tmp_path / "tl.svg"
    _wrote(_plot("throughput-latency", "--table", table, "--out", out), out, "svg")
    text = out.read_text()
    assert "in.gpu=a" in text and "in.gpu=b" in text  # grouped by the varied input only
    assert "in.model" not in text


def test_vary_crosses_flags_and_zips_assignments_within_one(tmp_path):
    out = tmp_path / "b.svg"
    res = _plot("breakdown", *TRAIN, "--vary", "schedule=1f1b,interleaved-1f1b "
                "virtual-stages=1,2", "--vary", "recompute=none,full", "--out", out)
    _wrote(res, out, "svg")
    lines = re.findall(r"<!-- ((?:schedule|virtual_stages|recompute)=\S+) -->", out.read_text())
    bars = {tuple(lines[i:i + 3]) for i in range(0, len(lines), 3)}  # one 3-line tick each
    assert len(lines) == 12 and bars == {
        (f"schedule={s}", f"virtual_stages={v}", f"recompute={r}")
        for s, v in (("1f1b", 1), ("interleaved-1f1b", 2)) for r in ("none", "full")}
