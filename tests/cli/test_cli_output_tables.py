"""Output that survives any terminal (issue 16, item 3): the tables print every value in full
in a pipe or CI log (CliRunner is not a terminal), with no '…', and labels are not eaten as
Rich markup; in a narrow terminal a cell wraps instead of being cut."""

import io

import pytest
from rich.console import Console
from typer.testing import CliRunner

from perfcast.cli import app
from perfcast.cli._console import Table, new_console
from perfcast.specs import device_names, model_entries, model_names

runner = CliRunner()
ELLIPSIS = "…"


def _table_output(*args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    assert ELLIPSIS not in res.stdout, res.stdout
    return res.stdout


def test_models_lists_every_full_name_and_hf_id():
    out = _table_output("models")
    for name in model_names():
        assert f" {name} " in out, name
    for entry in model_entries():
        if entry.get("hf_id"):
            assert entry["hf_id"] in out
    for column in ("params_b", "layers", "hidden", "kv_heads", "moe", "mla"):
        assert column in out


def test_hardware_list_and_show_print_full_names():
    out = _table_output("hardware", "list")
    for name in device_names():
        assert f" {name} " in out, name
    for column in ("bf16|fp16", "fp8", "fp4", "GB/s"):
        assert column in out
    shown = _table_output("hardware", "show", "h100-sxm")
    assert "gpus.csv" in shown


def test_capacity_table_keeps_every_column():
    out = _table_output("capacity", "--model", "llama-2-7b", "--gpu", "h100-sxm,a100-sxm4-80gb",
                        "--tp", "1", "--qps", "1", "--num-requests", "10", "--workers", "1")
    for column in ("max req/s per replica", "replicas", "$/M output tok", "P99 TTFT s",
                   "P99 TPOT s", "Pareto", "h100-sxm", "a100-sxm4-80gb"):
        assert column in out, column


def test_accel_table_keeps_every_column():
    out = _table_output("accel", "--layer", "conv1")
    for column in ("layer", "MACs", "cycles", "pJ/MAC", "bound by", "conv1"):
        assert column in out, column


@pytest.mark.parametrize("args", [
    ("infer", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--tp", "4"),
    ("serve", "--num-requests", "10", "--qps", "2"),
    ("step", "--model", "gpt2"),
    ("collective", "--op", "allreduce", "--num-gpus", "8", "--bytes", "64MB", "--gpu",
     "h100-sxm"),
    ("rag", "--gpu", "h100-sxm", "--output-tokens", "8"),
    ("diffusion", "--gpu", "a100-sxm4-80gb", "--steps", "2"),
], ids=lambda a: a[0])
def test_forecast_tables_print_in_full(args):
    _table_output(*args)


def test_suite_variant_labels_are_printed_not_eaten_as_markup(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("id: mine\ntitle: 7B on H100\ncommand: infer\nmodel: llama-2-7b\n"
                 "hardware: {gpu: h100-sxm}\nvariants: {fp8: {dtype: fp8}, bf16: {}}\n"
                 "targets: [{name: TTFT, path: ttft_s}]\n")
    out = _table_output("run", str(f))
    assert "TTFT [fp8]:" in out and "TTFT [bf16]:" in out


def test_a_narrow_terminal_wraps_cells_instead_of_cutting_them():
    table = Table(title="t")
    for column in ("name", "hf_id"):
        table.add_column(column)
    table.add_row("llama-3.1-405b-instruct", "meta-llama/Meta-Llama-3.1-405B-Instruct")
    buffer = io.StringIO()
    Console(file=buffer, width=30, color_system=None).print(table)
    text = buffer.getvalue()
    assert ELLIPSIS not in text
    cells = [line.split("│")[1:3] for line in text.splitlines() if line.startswith("│")]
    assert "".join(c[0].strip() for c in cells) == "llama-3.1-405b-instruct"
    assert "".join(c[1].strip() for c in cells) == "meta-llama/Meta-Llama-3.1-405B-Instruct"


def test_a_console_without_a_terminal_is_plain_and_wide(capsys):
    console = new_console()
    assert console.width >= 1000 and console.color_system is None


def test_models_search_filters_by_name_family_and_model_type():
    out = _table_output("models", "--search", "gpt_oss")
    assert " gpt-oss-120b " in out and " llama-2-7b " not in out
    assert "full+sliding" in out  # the attention column shows the layer pattern
    res = runner.invoke(app, ["models", "--search", "no-such-model"])
    assert res.exit_code == 2 and "search" in res.output


def test_the_learned_envelope_line_counts_every_family_the_trees_price():
    """Families the trees price with the device's own rows or beyond the trained
    generations are trees, not physics, and the line says why."""
    from perfcast.cli._console import stack_summary

    line = stack_summary({"stack": "trtllm", "learned_envelope": {
        "gemm": "learned", "moe": "learned, with the device's own measured rows",
        "attn_decode": "learned, beyond the trained generations 8-10.3 (Rubin)",
        "norm": "physical model: memory bandwidth outside the trained range"}})
    trees = line.splitlines()[1]
    assert trees.startswith("learned kernel model: trees for attn_decode, gemm, moe (")
    assert "beyond the trained generations" in trees and "own measured rows" in trees
    assert trees.endswith("physical model (outside the trees' training envelope) for norm")
