"""The point function sweeps run: a point's request through `perfcast.api.run`.

Module-level and importing only `perfcast.api`, so process-pool and Ray workers load it by
reference without the command line above it.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from perfcast.api import run_options
from perfcast.errors import from_validation_error

__all__ = ["run_point"]


def run_point(point: dict[str, Any]) -> dict[str, Any]:
    """A sweep point `{"command": ..., **options}` -> that command's `--json` payload, as JSON
    data (Python scalars, lists), the way `perfcast <command> --json` prints it."""
    options = dict(point)
    command = options.pop("command")
    try:
        payload = run_options(command, options).payload()
    except ValidationError as exc:
        raise from_validation_error(exc, default=command) from None
    return json.loads(json.dumps(payload))
