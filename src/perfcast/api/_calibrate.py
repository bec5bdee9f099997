"""`calibrate`: a target-measured calibration from a user's own measurements.

The device's own corrections are fitted on top of the shipped cross-generation parameters
(`kernels.add_target_corrections`); the result is used with `infer --calibration FILE`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import Field, ValidationError, model_validator

from perfcast.api._base import Group, Request, register
from perfcast.errors import (
    InputError,
    check_output_file,
    from_validation_error,
    read_user_json,
    writing,
)
from perfcast.kernels import (
    Calibration,
    PhysicsModel,
    add_target_corrections,
    shipped_calibration,
)
from perfcast.measure import check_measurements, to_ops
from perfcast.specs import Device, get_device

__all__ = ["CalibrateInputs", "CalibrateOutputs", "CalibrateRequest", "CalibrateResult",
           "ResolvedCalibrate", "load_device"]


class CalibrateInputs(Group):
    """The measurements and the device they are of."""

    measurements: Path = Field(description="Measurements (.parquet/.csv, store schema).")
    device: str = Field(description="Device the measurements are of.")
    device_spec: Path | None = Field(None, description="Device spec JSON for a device outside "
                                     "the catalog.")


class CalibrateOutputs(Group):
    """The calibration JSON to write."""

    out: Path = Field(description="Calibration JSON to write.")
    force: bool = Field(False, description="Overwrite --out.")


class CalibrateRequest(Request):
    """Fit a device's own corrections (target-measured tier) from its measurements."""

    command = "calibrate"
    inputs: CalibrateInputs
    outputs: CalibrateOutputs

    @model_validator(mode="before")
    @classmethod
    def _required_groups(cls, data: Any) -> Any:
        """A missing group is its missing options (the error names the option)."""
        return {"inputs": {}, "outputs": {}, **data} if isinstance(data, dict) else data


def load_device(name: str, spec: Path | None) -> Device:
    """A catalog GPU, or a spec file (e.g. the `<out>.device.json` that `perfcast measure`
    writes for the local CPU)."""
    if spec is not None:
        data = read_user_json(spec, "device_spec", "a device spec JSON (`perfcast measure` "
                              "writes one as <out>.device.json)")
        try:
            return Device(**data)
        except ValidationError as exc:
            raise from_validation_error(exc, prefix="device_spec.", origin=str(spec)) from None
    return get_device(name)


def _read(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise InputError("measurements", f"{path} does not exist", "a .parquet or .csv file")
    if path.suffix not in (".parquet", ".csv"):
        raise InputError("measurements", f"unsupported suffix {path.suffix!r}",
                         [".parquet", ".csv"])
    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path, keep_default_na=False)
    except (OSError, ValueError) as exc:  # pyarrow's and pandas' parse errors are ValueErrors
        reason = (str(exc).strip().splitlines() or ["unreadable"])[0]
        raise InputError("measurements", f"cannot read {path}: {reason}",
                         "a .parquet or .csv file from `perfcast measure`") from None


@dataclass(frozen=True)
class ResolvedCalibrate:
    """The device's spec and its rows of the measurements (checked, never empty)."""

    request: CalibrateRequest
    device: Device
    rows: pd.DataFrame


def resolve_calibrate(request: CalibrateRequest) -> ResolvedCalibrate:
    i, o = request.inputs, request.outputs
    check_output_file(o.out, "out", o.force)
    spec = load_device(i.device, i.device_spec)
    table = check_measurements(_read(i.measurements), "measurements")
    rows = table[table["device"] == spec.name]
    if rows.empty:
        raise InputError("device", f"no rows for {spec.name!r} in {i.measurements}",
                         sorted(set(table["device"])))
    return ResolvedCalibrate(request, spec, rows)


@dataclass(frozen=True)
class CalibrateResult:
    """The fitted calibration (written to `--out`), its device, the rows it was fitted on
    and how well it predicts them (in sample)."""

    request: CalibrateRequest
    calibration: Calibration
    device: Device
    rows: pd.DataFrame
    predicted_s: np.ndarray

    @property
    def families(self) -> list[str]:
        """The kernel families the device's own corrections cover."""
        return sorted(self.calibration.devices[self.device.name])

    @property
    def in_sample_mape(self) -> float:
        """Mean |predicted - measured| / measured over the rows it was fitted on."""
        measured = self.rows["latency_s"].to_numpy()
        return float((abs(self.predicted_s - measured) / measured).mean())

    def payload(self) -> dict[str, Any]:
        return {"path": str(self.request.outputs.out), "device": self.device.name,
                "rows": len(self.rows), "families": self.families,
                "in_sample_mape": self.in_sample_mape}


def execute_calibrate(r: ResolvedCalibrate) -> CalibrateResult:
    """Fit the device's corrections, write them, and predict the rows they came from."""
    spec, rows, out = r.device, r.rows, r.request.outputs.out
    own = add_target_corrections(shipped_calibration(), rows, devices={spec.name: spec})
    own.devices = {spec.name: own.devices.get(spec.name, {})}
    own.provenance = {"base": "perfcast shipped calibration",
                      "measurements": str(r.request.inputs.measurements),
                      "device": spec.name, "rows": len(rows)}
    with writing(out, "out"):
        out.write_text(own.to_json())
    pred = PhysicsModel(own).kernel_times(to_ops(rows), spec, rows["timing"].to_numpy(
        dtype=object))
    return CalibrateResult(r.request, own, spec, rows, pred)


register(CalibrateRequest, resolve_calibrate, execute_calibrate)
