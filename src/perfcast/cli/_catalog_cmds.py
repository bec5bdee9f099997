"""`perfcast hardware list|show` and `perfcast models`."""

from __future__ import annotations

from typing import Annotated

import typer

from perfcast.cli._common import FormatOption, JsonOption, emit, guarded, output_format
from perfcast.cli._console import Table, new_console
from perfcast.errors import AmbiguousName, InputError
from perfcast.specs import (
    Cluster,
    Device,
    cluster_names,
    device_names,
    get_cluster,
    get_device,
    get_model,
    model_entries,
)

hardware_app = typer.Typer(help="GPU, CPU and cluster catalog.", no_args_is_help=True)


def _fmt(value: float | None, scale: float, digits: int = 0) -> str:
    return "-" if value is None else f"{value / scale:,.{digits}f}"


def _tflops(value: float | None) -> str:
    """TFLOP/s with enough digits for a phone CPU (0.12) and a GPU (1,979) alike."""
    if value is None:
        return "-"
    return _fmt(value, 1e12, 2 if value < 10e12 else 1 if value < 100e12 else 0)


@hardware_app.command("list")
@guarded
def hardware_list(json_out: JsonOption = False, format_out: FormatOption = None) -> None:
    """List the catalog GPUs, CPU targets and cluster presets."""
    fmt = output_format(json_out, format_out)
    devices = [get_device(n) for n in device_names()]
    emit(fmt, lambda: _hardware_payload(devices), lambda: _print_hardware(devices))


def _hardware_payload(devices: list) -> dict:
    dump = [d.model_dump(mode="json", exclude={"sources"}) for d in devices]
    return {"gpus": [d for d in dump if d["kind"] == "gpu"],
            "cpus": [d for d in dump if d["kind"] == "cpu"], "clusters": cluster_names()}


def _print_hardware(devices: list) -> None:
    table = Table(title="GPUs and CPUs: dense peak TFLOP/s, memory GB and GB/s "
                        "(CPU: all cores, SMs = cores)")
    width = max(len(d.name) for d in devices)
    for col in ("name", "kind", "arch", "SMs", "fp32", "bf16|fp16", "fp8", "fp4", "GB",
                "GB/s"):
        table.add_column(col, justify="left" if col in ("name", "kind", "arch") else "right",
                         no_wrap=col == "name", min_width=width if col == "name" else None)
    for d in devices:
        p = d.dense_peak_flops
        table.add_row(d.name, d.kind.upper(), d.arch, str(d.sm_count),
                      _tflops(p.get("fp32")), _tflops(p.get("bf16") or p.get("fp16")),
                      _tflops(p.get("fp8")), _tflops(p.get("fp4")),
                      _fmt(d.hbm_capacity_bytes, 1e9), _fmt(d.hbm_bandwidth_bps, 1e9))
    console = new_console()
    console.print(table)
    console.print("Cluster presets: " + ", ".join(cluster_names()))


@hardware_app.command("show")
@guarded
def hardware_show(name: Annotated[str, typer.Argument(help="GPU, CPU or cluster preset name.")],
                  json_out: JsonOption = False, format_out: FormatOption = None) -> None:
    """Show one GPU or CPU (or cluster preset) with the source of every number."""
    fmt = output_format(json_out, format_out)
    payload = _hardware(name).model_dump(mode="json")
    emit(fmt, lambda: payload, lambda: _print_sources(dict(payload)))


def _hardware(name: str) -> Device | Cluster:
    """A GPU or CPU by name or alias, else a cluster preset by name or alias (`nvl72`,
    `DGX H100`). Known as neither: the device lookup's error (closest devices), unless the
    name is an ambiguous cluster alias, whose error lists its presets."""
    try:
        return get_device(name)
    except AmbiguousName:
        raise
    except InputError as as_device:
        try:
            return get_cluster(name)
        except AmbiguousName:
            raise
        except InputError:
            raise as_device from None


def _print_sources(payload: dict) -> None:
    """One row per field: its value and where the number comes from."""
    table = Table(title=payload["name"], show_lines=False)
    table.add_column("field")
    table.add_column("value")
    table.add_column("source")
    sources = payload.pop("sources", {})
    for key, value in payload.items():
        if isinstance(value, dict) and key == "dense_peak_flops":
            for dtype, flops in value.items():
                table.add_row(f"peak {dtype} FLOP/s", f"{flops:.4g}",
                              sources.get(f"{key}.{dtype}", ""))
        else:
            table.add_row(key, str(value), sources.get(key, ""))
    new_console().print(table)


@guarded
def models(search: Annotated[str | None, typer.Option(
               "--search", help="Only models whose name, HF id, alias, family or "
               "model_type contains this text.")] = None,
           json_out: JsonOption = False, format_out: FormatOption = None) -> None:
    """List the catalog models (shipped HuggingFace config.json files)."""
    fmt = output_format(json_out, format_out)
    rows = []
    for entry in model_entries(search):
        spec = get_model(entry["name"])
        kinds = sorted({mixer for mixer, _, _ in spec.layer_groups()} - {"none"})
        rows.append({"name": entry["name"], "hf_id": entry.get("hf_id"), "kind": spec.kind,
                     "params_b": round(spec.total_params() / 1e9, 3),
                     "layers": spec.num_layers, "hidden": spec.hidden_size,
                     "heads": spec.num_heads, "kv_heads": spec.num_kv_heads,
                     "moe": bool(spec.moe), "mla": bool(spec.mla),
                     "attention": "+".join(kinds), "inferred": "; ".join(spec.inferred)})
    if not rows:
        raise InputError("search", f"no catalog model matches {search!r}",
                         "a part of a name such as llama, qwen3, gpt-oss or deepseek")
    emit(fmt, lambda: {"models": rows}, lambda: _print_models(rows))


def _print_models(rows: list[dict]) -> None:
    table = Table(title="Models")
    for col in rows[0]:
        table.add_column(col)
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    new_console().print(table)


@guarded
def stacks(name: Annotated[str | None, typer.Argument(help="One stack: its kernel families "
                                                      "and where each is priced from.")] = None,
           json_out: JsonOption = False, format_out: FormatOption = None) -> None:
    """List the software stacks and, per kernel family, whether it is measured on that stack
    (on which devices), borrowed from another stack's kernels, or roofline-only."""
    from perfcast.kernels import stack_families
    from perfcast.specs import get_stack, stack_names

    fmt = output_format(json_out, format_out)
    chosen = [get_stack(name)] if name is not None else [get_stack(n) for n in stack_names()]
    rows = [{**s.card(), "description": s.description, "host": s.host.model_dump(),
             "kv_budget": s.kv_budget.value, "families": stack_families(s),
             "engine": None if s.engine is None else s.engine.model_dump(mode="json"),
             "provenance": s.provenance} for s in chosen]
    emit(fmt, lambda: {"stacks": rows}, lambda: _print_stacks(rows, detail=name is not None))


_STATUS = {"measured": "M", "borrowed": "B", "roofline-only": "R"}


def _print_stacks(rows: list[dict], detail: bool) -> None:
    families = list(rows[0]["families"])
    if detail:
        row = rows[0]
        table = Table(title=f"{row['name']}: {row['framework']} {row['version']} — "
                            f"attention {row['attention']}, {row['graph_capture']}, KV cache "
                            f"a share of the {row['kv_budget']} memory")
        for col in ("family", "status", "kernel source", "measured on", "note"):
            table.add_column(col)
        for fam, e in row["families"].items():
            table.add_row(fam, e["status"], str(e["kernel_source"]),
                          ", ".join(e["devices"]) or "-", e.get("note", ""))
        console = new_console()
        console.print(table)
        if row["engine"] is not None:
            tiers = "; ".join(f">= {t['min_memory_gib']:g} GiB"
                              + (f" (not {', '.join(t['exclude'])})" if t["exclude"] else "")
                              + f": {t['max_batch_tokens']} tokens, {t['max_seqs']} sequences"
                              for t in row["engine"]["tiers"])
            console.print(f"serving engine defaults: {row['engine']['scheduler']}; {tiers}. "
                          f"Source: {row['engine']['provenance']}")
        h = row["host"]
        console.print(f"host ({h['reference_cpu']}): {h['op_dispatch_s'] * 1e6:g} us per "
                      f"eager kernel, {h['prefill_dispatch_s'] * 1e6:g} us per kernel of a "
                      f"serving prefill step. Source: {h['provenance']}")
        return
    table = Table(title="Software stacks: per kernel family M measured on the stack's own "
                        "kernels, B borrowed from another stack's, R roofline-only "
                        "(`perfcast stacks NAME` for devices and sources)")
    for col in ("name", "attention", "graphs", *families):
        table.add_column(col, no_wrap=col == "name")
    for row in rows:
        table.add_row(row["name"], row["attention"], row["graph_capture"],
                      *(_STATUS[row["families"][f]["status"]] for f in families))
    new_console().print(table)
