"""CLI plumbing: turning bad input into one clear line and exit code 2."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from perfcast.compose import HOST_PROFILES
from perfcast.errors import InputError, from_validation_error
from perfcast.specs import Cluster, cluster_for, get_cluster, get_device

__all__ = ["CalibrationOption", "HostOption", "JsonOption", "KernelModelOption", "emit_json",
           "fail", "guarded", "machines_for", "to_input_error"]

# Options several forecasting commands share, declared once.
KernelModelOption = Annotated[str, typer.Option(
    "--kernel-model", help="calibrated (fitted on measurements) or roofline.")]
CalibrationOption = Annotated[str | None, typer.Option(
    help="Extra calibration JSON from `perfcast calibrate`.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
HostOption = Annotated[str, typer.Option(
    help=f"Per-step host overhead of the serving engine: {', '.join(HOST_PROFILES)}.")]


def to_input_error(exc: ValidationError, prefix: str = "") -> InputError:
    return from_validation_error(exc, prefix=prefix, default=exc.title)


def fail(exc: InputError) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(code=2)


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run a command; an InputError or spec validation error becomes one line + exit 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            fail(exc)
        except ValidationError as exc:
            fail(to_input_error(exc))

    return wrapper


def machines_for(gpu: str | None, cluster: str | None, gpus: int) -> Cluster:
    """The `--gpu` (nodes of 8 built around it) or `--cluster` preset a command runs on,
    sized for `gpus`; exactly one of the two must be given."""
    if (gpu is None) == (cluster is None):
        raise InputError("gpu", "give exactly one of --gpu or --cluster",
                         "a catalog GPU (`perfcast hardware list`) or a cluster preset")
    return get_cluster(cluster, gpus) if cluster else cluster_for(get_device(gpu), gpus)


def emit_json(payload: dict) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, sort_keys=False) + "\n")
