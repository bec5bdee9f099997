"""Every row of AIConfigurator's silicon sample is a `perfcast serve` request and command a
user can type (issue 20's done-when): as many requests and commands as rows, each command
parsed by the CLI back into the equal request, each deployment column carried."""

from __future__ import annotations

import shlex
from functools import cache
from pathlib import Path

import pandas as pd
import pytest
import typer.main

from perfcast.api import ServeRequest
from perfcast.api._base import resolve
from perfcast.cli import app
from perfcast.cli._common import cli_options
from perfcast.validate._silicon import (
    COLUMNS,
    coverage_summary,
    silicon_coverage,
    silicon_deployments,
)

REPO = Path(__file__).resolve().parents[2]
CSV = REPO.parent / "shared" / "data" / "aiconfigurator" / "systems" / "silicon_sample_dev.csv"
pytestmark = pytest.mark.skipif(not CSV.is_file(), reason="shared data not here")


@cache
def _rows() -> pd.DataFrame:
    return pd.read_csv(CSV)


@cache
def _deployments():
    return tuple(silicon_deployments(_rows()))


@cache
def _serve_command():
    return typer.main.get_command(app).commands["serve"]


def _parsed(command: str) -> ServeRequest:
    """The command as the CLI reads it: its serve command's parameters as the request."""
    argv = shlex.split(command)
    assert argv[:2] == ["perfcast", "serve"]
    with _serve_command().make_context("serve", argv[2:]) as ctx:
        return ServeRequest.from_options(cli_options(ctx.params))


def test_every_row_is_a_request_and_a_command():
    rows, deployments = _rows(), _deployments()
    assert len(rows) == 2969
    assert len(deployments) == len(rows)
    assert sum(1 for d in deployments if d.command.startswith("perfcast serve ")) == len(rows)
    assert [d.row_id for d in deployments] == rows["id"].astype(str).tolist()


def test_each_command_parses_back_to_its_request():
    for d in _deployments():
        assert _parsed(d.command) == d.request, d.row_id


def test_every_column_has_a_place():
    assert set(_rows().columns) == set(COLUMNS)


def test_deployment_columns_are_carried():
    for (_, row), d in zip(_rows().iterrows(), _deployments(), strict=True):
        r = d.request
        assert (r.model.name, r.stack.stack) == (row["model_path"], row["backend"])
        assert (int(r.workload.prompt_tokens), int(r.workload.output_tokens)) == (
            row["isl"], row["osl"])
        if row["mode"] == "agg":
            dp = 1 if pd.isna(row["attention_dp_size"]) else int(row["attention_dp_size"])
            assert (r.deployment.tp, r.deployment.attention_dp) == (row["tp_size"], dp)
            assert r.engine.max_batch == row["batch_size"] and not r.disaggregation.enabled
            if row["moe_ep_size"] > 1:
                assert r.deployment.ep == row["moe_ep_size"]
            continue
        for pool, layout in (("prefill", r.disaggregation.disagg_prefill),
                             ("decode", r.disaggregation.disagg_decode)):
            assert layout.tp == row[f"{pool}_tp_size"], d.row_id
            if not pd.isna(row[f"{pool}_num_workers"]):
                assert layout.workers == row[f"{pool}_num_workers"]
                assert layout.max_batch == row[f"{pool}_batch_size"]
            else:
                assert f"{pool}_num_workers" in d.assumed


def test_expert_splits_and_wide_layouts_are_all_written():
    deployments = _deployments()
    moe_tp = [d for d in deployments if d.request.deployment.moe_tp is not None]
    assert moe_tp and all(d.request.deployment.ep == 1 for d in moe_tp)  # TP across DP
    wide = [d for d in deployments if d.request.deployment.tp == 64]
    assert wide and all(d.request.deployment.moe_tp is None for d in wide)  # 8 x 8 implied
    assert any(d.request.quantisation.moe_quant == "fp8_block" for d in deployments)


def test_coverage_says_which_rows_resolve_and_why_the_others_do_not():
    """Every deployment of the sample resolves, vLLM's DP without expert parallelism (experts
    TP-split over tp x dp ranks, ParallelPlan.expert_tp) included, and every one fits the
    memory planner (they all ran). Ten of them did not before the stacks' engine defaults:
    SGLang DeepSeek-V3/R1 FP8 at TP4 on B200 with 8192-token prompts, whose command line
    leaves the token budget unset; vllm-v0 then took the whole 163,840-token context as one
    prefill's workspace, where SGLang chunks prefills at 16,384 tokens on a B200."""
    coverage = silicon_coverage(list(_deployments()))
    assert len(coverage) == len(_rows())
    assert coverage["modelled"].all(), coverage[~coverage["modelled"]].head()
    summary = coverage_summary(coverage)
    assert summary["modelled"] == summary["rows"] and summary["refused"] == []
    sglang = [d for d in _deployments() if d.request.stack.stack == "sglang"
              and d.request.hardware.gpu == "b200-sxm" and d.request.deployment.tp == 4
              and d.request.model.name.startswith("deepseek")]
    assert sglang
    config = resolve(sglang[0].request).config
    assert (config.scheduler, config.token_budget) == ("prefill-first", 16384)
