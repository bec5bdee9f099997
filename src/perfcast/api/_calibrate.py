"""`calibrate`: a target-measured calibration from a user's own measurements.

The device's own corrections are fitted on top of the shipped parameters and kept family by
family only where they beat the shipped model out of sample (`kernels.calibrate_device`);
the file records the device, the stack, how the rows were timed and the check of every
family, and is used with `infer/step/serve --calibration FILE`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, model_validator

from perfcast.api._base import Group, Request, register
from perfcast.api._choices import device_from_spec
from perfcast.api._measure import steps_path
from perfcast.errors import (
    InputError,
    check_output_file,
    writing,
)
from perfcast.specs import Device, get_device, get_stack

if TYPE_CHECKING:  # the fits, the store and pandas load when a request runs, not for --help
    import pandas as pd

    from perfcast.api._calibrate_host import HostFit
    from perfcast.kernels import Calibration
    from perfcast.kernels._target import DeviceCalibration
    from perfcast.measure import StepMeasurements

__all__ = ["CalibrateInputs", "CalibrateOutputs", "CalibrateRequest", "CalibrateResult",
           "ResolvedCalibrate", "load_device"]


class CalibrateInputs(Group):
    """The measurements and the device they are of."""

    measurements: Path = Field(description="Measurements (.parquet/.csv, store schema).")
    device: str = Field(description="Device the measurements are of.")
    device_spec: Path | None = Field(None, description="Device spec JSON for a device outside "
                                     "the catalog.")
    stack: str | None = Field(None, description="Software stack the kernels were timed "
                              "through (`perfcast stacks`); default: hf-transformers for "
                              "torch-timed rows, none for numpy kernels.")
    steps: Path | None = Field(None, description="Whole steps timed by `perfcast measure "
                               "--model` (<out>.steps.json), to fit the stack's host speed; "
                               "default: the one beside --measurements, when there is one.")
    folds: int = Field(5, ge=2, le=20, description="Cross-validation folds of the check "
                       "against the shipped model.")
    seed: int = Field(0, ge=0, description="Seed of the folds.")


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
    return get_device(name) if spec is None else device_from_spec(spec)


def _read(path: Path) -> pd.DataFrame:
    import pandas as pd

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


TORCH_TIMINGS = frozenset({"cuda_graph", "cuda_event", "kineto", "eager", "sync_wallclock"})
# Rows timed with launch latency in the kernel time (`perfcast measure --device cuda` before
# graph timing): fitted as kernel time, they make graph-replayed forecasts too slow.
LAUNCH_INCLUDED = frozenset({"cuda_event"})


@dataclass(frozen=True)
class ResolvedCalibrate:
    """The device's spec, its rows of the measurements (checked, never empty) and the
    stack they were timed through (None: numpy kernels, no framework)."""

    request: CalibrateRequest
    device: Device
    rows: pd.DataFrame
    stack: str | None
    steps: StepMeasurements | None = None
    steps_path: Path | None = None


def _torch_timed(rows: pd.DataFrame) -> bool:
    files = rows["source_file"].astype(str)
    return bool(rows["timing"].isin(TORCH_TIMINGS).any() or files.str.contains("torch").any())


def _stack(given: str | None, rows: pd.DataFrame) -> str | None:
    if given is not None:
        return get_stack(given).name  # an unknown name: InputError listing the stacks
    return "hf-transformers" if _torch_timed(rows) else None


def resolve_calibrate(request: CalibrateRequest) -> ResolvedCalibrate:
    from perfcast.measure import check_measurements, load_steps

    i, o = request.inputs, request.outputs
    check_output_file(o.out, "out", o.force)
    spec = load_device(i.device, i.device_spec)
    table = check_measurements(_read(i.measurements), "measurements")
    rows = table[table["device"] == spec.name]
    if rows.empty:
        raise InputError("device", f"no rows for {spec.name!r} in {i.measurements}",
                         sorted(set(table["device"])))
    steps_path = i.steps or _beside(i.measurements)
    steps = None if steps_path is None else load_steps(steps_path)
    if steps is not None and steps.device != spec.name:
        raise InputError("steps", f"{steps_path} was timed on {steps.device}, not on "
                         f"{spec.name}", f"steps measured on {spec.name}")
    if steps is not None and i.stack is not None and get_stack(i.stack).name != steps.stack:
        raise InputError("stack", f"{steps_path} ran stack {steps.stack}, not {i.stack}",
                         [steps.stack])
    stack = steps.stack if steps is not None else _stack(i.stack, rows)
    return ResolvedCalibrate(request, spec, rows, stack, steps, steps_path)


def _beside(measurements: Path) -> Path | None:
    """The steps file `perfcast measure --model` wrote beside the measurements, if any."""
    path = steps_path(measurements)
    return path if path.exists() else None


def harness(rows: pd.DataFrame) -> dict[str, Any]:
    """How the rows were measured: timing methods, the measuring tools (torch/CUDA versions
    and the GPU, or numpy and its BLAS, as `perfcast measure` names them) and whether
    launch latency is inside their kernel times."""
    timings = sorted(set(rows["timing"].astype(str)))
    return {"timing": timings, "measured_with": sorted(set(rows["source_file"].astype(str))),
            "launch_included": bool(set(timings) & LAUNCH_INCLUDED)}


@dataclass(frozen=True)
class CalibrateResult:
    """The calibration written to `--out` (only the corrections that passed the check),
    its device and stack, the rows it was fitted on and the per-family check."""

    request: CalibrateRequest
    result: DeviceCalibration
    device: Device
    rows: pd.DataFrame
    stack: str | None
    host: HostFit | None = None

    @property
    def calibration(self) -> Calibration:
        return self.result.own

    @property
    def families(self) -> list[str]:
        """The family/dtype corrections the file holds (those that passed the check)."""
        return self.result.calibrated

    def warnings(self) -> list[str]:
        out = self.result.warnings()
        if harness(self.rows)["launch_included"]:
            out.append("rows timed with launch latency inside the kernel time (timing "
                       "cuda_event): graph-replayed forecasts come out too slow; remeasure "
                       "with `perfcast measure --device cuda` (CUDA-graph timing)")
        if self.host is not None and any(s["quiet"] is False for s in self.host.steps):
            out.append("some steps were timed while the machine was busy (quiet: false in "
                       "the steps file): rerun `perfcast measure --model` on an idle machine")
        learned = self.learned_target["families"]
        if not self.families:
            out.append("no family beat the shipped model out of sample: the file changes "
                       "no forecast" + (f" but those of --kernel-model learned (its "
                                        f"residual corrects {', '.join(learned)})"
                                        if learned else ""))
        return out

    @property
    def learned_target(self) -> dict[str, list]:
        """The learned model's target tier in the file: {"families": the families its
        residual corrects under `--kernel-model learned`, "residual_trees": those whose
        residual trees beat the nearest-shape residual alone in cross-validation, "checks":
        per family, held-out MAPE of the trees alone and with the residual}."""
        learned = self.calibration.learned
        checks = learned.get("checks", [])
        tier = learned.get("devices", {}).get(self.device.name)
        if tier is None:
            return {"families": [], "residual_trees": [], "checks": checks}
        return {"families": sorted(tier["envelope"]), "residual_trees": tier["families"],
                "checks": checks}

    def payload(self) -> dict[str, Any]:
        return {"path": str(self.request.outputs.out), "device": self.device.name,
                "stack": self.stack, "rows": len(self.rows), "families": self.families,
                "learned_target": self.learned_target,
                "kept_shipped": self.result.kept,
                "checks": [c.to_dict() for c in self.result.checks],
                "harness": harness(self.rows),
                "host": None if self.host is None else self.host.to_dict(),
                "warnings": self.warnings()}


def execute_calibrate(r: ResolvedCalibrate) -> CalibrateResult:
    """Fit and check the device's corrections, then write those that passed."""
    from perfcast.kernels import shipped_calibration
    from perfcast.kernels._target import calibrate_device

    i, out = r.request.inputs, r.request.outputs.out
    prov = {"base": "perfcast shipped calibration", "measurements": str(i.measurements),
            "device": r.device.name, "device_kind": r.device.kind, "stack": r.stack,
            "rows": len(r.rows), "harness": harness(r.rows), "folds": i.folds,
            "seed": i.seed, "host": _host(r)}
    if r.steps_path is not None:
        prov["steps"] = str(r.steps_path)
    result = calibrate_device(shipped_calibration(), r.rows, r.device, folds=i.folds,
                              seed=i.seed, provenance=prov)
    result.own.learned = _learned_tier(r, i.folds, i.seed)
    host = None if r.steps is None else _fit_host(r, result)
    with writing(out, "out"):
        out.write_text(result.own.to_json())
    return CalibrateResult(r.request, result, r.device, r.rows, r.stack, host)


def _learned_tier(r: ResolvedCalibrate, folds: int, seed: int) -> dict:
    """The learned model's target tier from the same rows (`--kernel-model learned
    --calibration FILE`): the device's residual over the shipped trees, kept family by
    family where it beats the trees alone on held-out folds (kernels.learned_target_tier);
    none for a CPU, which the trees never price."""
    from perfcast.kernels import learned_target_tier, shipped_learned

    if r.device.kind == "cpu":
        return {}
    return learned_target_tier(shipped_learned(), r.rows, r.device, folds, seed)


def _host(r: ResolvedCalibrate) -> str:
    """The host CPU the steps were timed on (from the steps file), else this machine's, which
    ran `calibrate` (the same machine as `measure` in the usual flow)."""
    from perfcast.measure._cpu import cpu_info

    if r.steps is not None:
        return r.steps.host
    info = cpu_info()
    return f"{info.model} ({info.logical_cpus} logical CPUs; calibrate's host)"


def _kernel_errors(result: DeviceCalibration) -> dict[str, float]:
    """Held-out mean |log error| of each checked family/dtype as calibrated."""
    return {c.key: c.kept_log_error for c in result.checks if c.kept_log_error is not None}


def _fit_host(r: ResolvedCalibrate, result: DeviceCalibration) -> HostFit:
    """The host speed of the measured steps, forecast with the kernel corrections (from a
    temporary file beside --out, removed after); recorded in `result.own.host`."""
    from perfcast.api._calibrate_host import fit_host_speed

    i, out = r.request.inputs, r.request.outputs.out
    hardware = ({"device_spec": i.device_spec} if i.device_spec is not None
                else {"gpu": r.device.name})
    kernels = out.with_name(f".{out.name}.kernels.tmp")
    try:
        with writing(kernels, "out"):
            kernels.write_text(result.own.to_json())
        host = fit_host_speed(r.steps, kernels, hardware, _kernel_errors(result))
    finally:
        kernels.unlink(missing_ok=True)
    result.own.host = host.to_dict()
    return host


register(CalibrateRequest, resolve_calibrate, execute_calibrate)
