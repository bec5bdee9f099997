"""Every deployment of AIConfigurator's measured silicon sample as a `perfcast serve` request
and the command line a user types for it (issue 20: whatever `validate serving` replays, a
user can write).

`silicon_deployments(rows)` maps each row of `systems/silicon_sample_dev.csv` (aggregated and
disaggregated) to a `ServeRequest` and `ServeRequest.command_line()`; the model is the row's
HF id, resolved only when the request runs. `COLUMNS` says where each column goes:
deployment columns become options, the measured TTFT/TPOT are the benchmark's outputs, and
the rest is provenance kept beside the request. Values a row leaves empty take the
request's defaults and are listed in `SiliconDeployment.assumed`, never filled silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import pandas as pd

from perfcast.api import resolve
from perfcast.api._serve import ServeRequest
from perfcast.errors import InputError
from perfcast.serve import plan_memory
from perfcast.serve._disagg import PoolLayout
from perfcast.validate._serving_sim import ROUNDS

__all__ = ["COLUMNS", "SYSTEMS", "SiliconDeployment", "coverage_summary", "load_silicon_rows",
           "row_options", "shipped_coverage", "silicon_coverage", "silicon_deployments"]

SILICON_FILE = "silicon_sample_dev.csv.gz"  # a byte copy, gzipped (validate/data/README.md)

SYSTEMS = {"h100_sxm": "h100-sxm", "b200_sxm": "b200-sxm"}  # AIConfigurator -> catalog GPU
COLUMNS = {
    "model_path": "model (the HF id)",
    "system": "gpu (SYSTEMS)",
    "backend": "stack (trtllm, vllm, sglang: perfcast's stacks of those names)",
    "mode": "agg: the deployment options; disagg: disagg_prefill and disagg_decode",
    "isl": "prompt_tokens (fixed lengths)",
    "osl": "output_tokens",
    "precision": "dtype (int4: weight_dtype int4 with bf16 activations)",
    "gemm_quant_mode": "gemm_quant",
    "moe_quant_mode": "moe_quant",
    "batch_size": "max_batch (per attention-DP rank, each a replica)",
    "tp_size": "tp (attention TP)",
    "pp_size": "pp",
    "attention_dp_size": "attention_dp, and replicas = attention_dp (one worker)",
    "moe_ep_size": "ep",
    "moe_tp_size": "moe_tp, written where it is not the one tp, attention_dp and ep imply "
                   "(0 x 0 or 1 x 1 with moe_ep_size: no expert split recorded)",
    **{f"{pool}_{col}": f"disagg_{pool} ({key})" for pool in ("prefill", "decode")
       for col, key in (("num_workers", "workers"), ("tp_size", "tp"), ("pp_size", "pp"),
                        ("attention_dp_size", "dp"), ("moe_tp_size", "moe_tp"),
                        ("moe_ep_size", "ep"), ("batch_size", "batch"))},
    "silicon_data_source": "concurrency (its silicon_concurrency=N, else the id's _cN_, "
                           "else batch x workers x attention-DP ranks) and num_requests = "
                           f"{ROUNDS} x concurrency (the replay's client); the rest provenance",
    "id": "provenance (SiliconDeployment.row_id)",
    "backend_version": "provenance: each perfcast stack prices with one version's kernel "
                       "tables (`perfcast stacks`)",
    "silicon_ttft_ms": "measured output (mean TTFT)",
    "silicon_tpot_ms": "measured output (mean TPOT)",
}


@dataclass(frozen=True)
class SiliconDeployment:
    """One row as a request and its command line; `assumed`: the row's empty columns whose
    values the request takes as its defaults; `concurrency_source`: where the client's
    concurrency came from."""

    row_id: str
    request: ServeRequest
    command: str
    assumed: tuple[str, ...]
    concurrency_source: str


def silicon_deployments(rows: pd.DataFrame) -> list[SiliconDeployment]:
    """Every row of the silicon sample (read with `pd.read_csv`) as a deployment."""
    out = []
    for _, row in rows.iterrows():
        options, assumed, source = row_options(row)
        request = ServeRequest.from_options(options)
        out.append(SiliconDeployment(str(row["id"]), request, request.command_line(),
                                     assumed, source))
    return out


@cache
def load_silicon_rows() -> pd.DataFrame:
    """AIConfigurator's silicon_sample_dev.csv as shipped (every measured deployment)."""
    with resources.as_file(resources.files("perfcast.validate") / "data" / SILICON_FILE) as f:
        return pd.read_csv(f)


@cache
def shipped_coverage() -> dict[str, Any]:
    """coverage_summary of the shipped sample (resolving 2,969 requests takes seconds: once
    per process)."""
    return coverage_summary(silicon_coverage(silicon_deployments(load_silicon_rows())))


def coverage_summary(coverage: pd.DataFrame) -> dict[str, Any]:
    """How many deployments resolve, and the refusals grouped by the option they name."""
    refused = coverage[~coverage["modelled"]]
    groups = (refused.groupby(["field", "reason"], sort=True).size()
              .reset_index(name="rows").sort_values("rows", ascending=False, kind="stable"))
    return {"rows": len(coverage), "modelled": int(coverage["modelled"].sum()),
            "share": float(coverage["modelled"].mean()) if len(coverage) else 0.0,
            "refused": groups.to_dict("records")}


def silicon_coverage(deployments: list[SiliconDeployment]) -> pd.DataFrame:
    """Per deployment: whether perfcast resolves it (model, GPU, layout and precision all
    modelled) and its memory planner fits every GPU of it (each pool of a disaggregated
    one), else the option its refusal names and why. Nothing is priced or simulated."""
    rows = []
    for d in deployments:
        try:
            for config in resolve(d.request).configs:
                plan_memory(config)
        except InputError as exc:
            rows.append({"row_id": d.row_id, "modelled": False, "field": exc.field,
                         "reason": exc.problem})
        else:
            rows.append({"row_id": d.row_id, "modelled": True, "field": None, "reason": None})
    return pd.DataFrame(rows, columns=["row_id", "modelled", "field", "reason"])


def row_options(row: pd.Series) -> tuple[dict[str, Any], tuple[str, ...], str]:
    """(the row's flat `serve` options, the empty columns left at their defaults, where the
    concurrency came from)."""
    system = str(row["system"])
    if system not in SYSTEMS:
        raise InputError("system", f"row {row['id']}: unknown system {system!r}", SYSTEMS)
    options = {"model": str(row["model_path"]), "gpu": SYSTEMS[system],
               "stack": str(row["backend"]), "prompt_tokens": str(int(row["isl"])),
               "output_tokens": str(int(row["osl"])), **_precision(row)}
    assumed: list[str] = []
    if row["mode"] == "disagg":
        for pool in ("prefill", "decode"):
            options[f"disagg_{pool}"] = str(_layout(row, f"{pool}_", assumed))
    else:
        options |= _aggregated(row, assumed)
    concurrency, source = _concurrency(row)
    options |= {"concurrency": concurrency, "num_requests": ROUNDS * concurrency}
    return options, tuple(assumed), source


def _number(row: pd.Series, column: str, assumed: list[str] | None = None) -> int | None:
    """The column's whole number; None where empty (noted in `assumed` when given)."""
    value = row[column]
    if pd.isna(value):
        if assumed is not None:
            assumed.append(column)
        return None
    return int(value)


def _text(row: pd.Series, column: str) -> str | None:
    value = row[column]
    return None if pd.isna(value) else str(value)


def _precision(row: pd.Series) -> dict[str, str]:
    out = {}
    precision = _text(row, "precision")
    if precision is not None:
        out["weight_dtype" if precision == "int4" else "dtype"] = precision
    for column, option in (("gemm_quant_mode", "gemm_quant"), ("moe_quant_mode", "moe_quant")):
        if _text(row, column) is not None:
            out[option] = _text(row, column)
    return out


def _experts(moe_tp: int | None, moe_ep: int | None, tp: int, dp: int
             ) -> tuple[int, int | None]:
    """(ep, moe_tp or None where it is the implied tp x dp / ep, tp without EP). Rows write
    0 x 0 (vLLM) or 1 x 1 (dense models) where no expert split was set; with attention DP
    that is vLLM's default without --enable-expert-parallel: every expert TP-split over
    all tp x dp ranks (its data-parallel MoE path)."""
    moe_tp, ep = moe_tp or 0, max(moe_ep or 0, 1)
    if moe_tp == 0 and ep == 1 and dp > 1:
        return 1, tp * dp
    implied = tp * dp // ep if ep > 1 else tp
    return ep, None if moe_tp in (0, implied) or (moe_tp == 1 and ep == 1) else moe_tp


def _aggregated(row: pd.Series, assumed: list[str]) -> dict[str, int]:
    tp, pp = _number(row, "tp_size"), _number(row, "pp_size")
    dp = _number(row, "attention_dp_size", assumed) or 1
    ep, moe_tp = _experts(_number(row, "moe_tp_size"), _number(row, "moe_ep_size"), tp, dp)
    out = {"tp": tp, "pp": pp, "attention_dp": dp, "replicas": dp, "ep": ep,
           "max_batch": _number(row, "batch_size")}
    return out | ({"moe_tp": moe_tp} if moe_tp is not None else {})


def _layout(row: pd.Series, prefix: str, assumed: list[str]) -> PoolLayout:
    """One disaggregated pool; empty worker and batch counts take PoolLayout's defaults."""
    tp = _number(row, f"{prefix}tp_size")
    dp = _number(row, f"{prefix}attention_dp_size", assumed) or 1
    ep, moe_tp = _experts(_number(row, f"{prefix}moe_tp_size"),
                          _number(row, f"{prefix}moe_ep_size"), tp, dp)
    return PoolLayout(workers=_number(row, f"{prefix}num_workers", assumed) or 1, tp=tp,
                      pp=_number(row, f"{prefix}pp_size", assumed) or 1, ep=ep,
                      attention_dp=dp, moe_tp=moe_tp,
                      max_batch=_number(row, f"{prefix}batch_size", assumed))


def _concurrency(row: pd.Series) -> tuple[int, str]:
    """The benchmark client's requests in flight, and which column gave it."""
    found = re.search(r"silicon_concurrency=(\d+)", str(row["silicon_data_source"]))
    if found:
        return int(found[1]), "silicon_data_source"
    found = re.search(r"_c(\d+)_", str(row["id"]))
    if found:
        return int(found[1]), "id"
    if row["mode"] == "disagg":
        batch = [_number(row, f"decode_{c}") or 1 for c in ("batch_size", "num_workers",
                                                             "attention_dp_size")]
        return batch[0] * batch[1] * batch[2], "decode batch x workers x attention-DP ranks"
    return (_number(row, "batch_size") * (_number(row, "attention_dp_size") or 1),
            "batch x attention-DP ranks")
