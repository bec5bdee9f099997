"""`perfcast calibrate`: a target-measured calibration from a user's own measurements."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from perfcast.cli._common import emit_json, guarded
from perfcast.errors import InputError, read_user_json
from perfcast.kernels import PhysicsModel, add_target_corrections, shipped_calibration
from perfcast.measure import check_measurements, to_ops
from perfcast.specs import Device, get_device


def _read(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise InputError("measurements", f"{path} does not exist", "a .parquet or .csv file")
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix == ".csv":
        return pd.read_csv(path, keep_default_na=False)
    raise InputError("measurements", f"unsupported suffix {path.suffix!r}", [".parquet", ".csv"])


def load_device(name: str, spec: Path | None) -> Device:
    """A catalog GPU, or a spec file (e.g. the `<out>.device.json` that `perfcast measure`
    writes for the local CPU)."""
    if spec is not None:
        return Device(**read_user_json(spec, "spec", "a device spec JSON (`perfcast measure` "
                                       "writes one as <out>.device.json)"))
    return get_device(name)


@guarded
def calibrate(
    measurements: Annotated[Path, typer.Option(help="Measurements (.parquet/.csv, store schema).")],
    device: Annotated[str, typer.Option(help="Device the measurements are of.")],
    out: Annotated[Path, typer.Option(help="Calibration JSON to write.")],
    device_spec: Annotated[Path | None, typer.Option(
        help="Device spec JSON for a device outside the catalog.")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite --out.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """Fit this device's own corrections (target-measured tier) on top of the shipped
    cross-generation parameters; use the result with `perfcast infer --calibration FILE`."""
    if out.exists() and not force:
        raise InputError("out", f"{out} exists; pass --force to overwrite", "a new path")
    spec = load_device(device, device_spec)
    table = check_measurements(_read(measurements), "measurements")
    rows = table[table["device"] == spec.name]
    if rows.empty:
        raise InputError("device", f"no rows for {spec.name!r} in {measurements}",
                         sorted(set(table["device"])))
    base = shipped_calibration()
    own = add_target_corrections(base, rows, devices={spec.name: spec})
    own.devices = {spec.name: own.devices.get(spec.name, {})}
    own.provenance = {"base": "perfcast shipped calibration", "measurements": str(measurements),
                      "device": spec.name, "rows": len(rows)}
    out.write_text(own.to_json())
    pred = PhysicsModel(own).kernel_times(to_ops(rows), spec, rows["timing"].to_numpy(
        dtype=object))
    ape = (abs(pred - rows["latency_s"].to_numpy()) / rows["latency_s"].to_numpy())
    summary = {"path": str(out), "device": spec.name, "rows": len(rows),
               "families": sorted(own.devices[spec.name]), "in_sample_mape": float(ape.mean())}
    if json_out:
        emit_json(summary)
    else:
        typer.echo(f"wrote {out}: {len(rows)} rows of {spec.name}, in-sample MAPE "
                   f"{ape.mean():.1%} ({', '.join(summary['families'])})")
