"""A scenario file: one question, as a command's options grouped the way a practitioner
thinks of them (model, hardware, plan, workload), plus the metrics that answer it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from perfcast.errors import InputError, from_validation_error, parse_user_yaml, read_user_text

__all__ = ["MAX_SCENARIO_BYTES", "SECTIONS", "Scenario", "Target", "load_scenario",
           "parse_scenario"]

MAX_SCENARIO_BYTES = 256 * 1024  # a scenario is a page of YAML; refuse anything far larger
SECTIONS = ("model", "hardware", "plan", "workload", "options")
Scalar = str | int | float | bool | None
OptionValue = Scalar | list[Scalar]
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class Target(BaseModel):
    """A metric the scenario must print: `path` is its dotted key in the command's JSON
    (list items by index). With `baseline`, the value is baseline's / variant's (a speedup)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(min_length=1, max_length=80)
    path: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.]+$")
    variant: str | None = None  # None: every variant must print it
    baseline: str | None = None  # a variant; needs `variant`
    unit: Literal["s", "bytes", "fraction", "ratio"] | None = None  # None: from the key

    @model_validator(mode="after")
    def _ratio_unit(self) -> Target:
        if self.baseline is not None and self.unit not in (None, "ratio"):
            raise ValueError(f"target {self.name!r}: a baseline makes a ratio, not {self.unit}")
        return self

    @property
    def shown_unit(self) -> str | None:
        """The unit a report prints: a ratio for speed-ups, else the declared one."""
        return "ratio" if self.baseline is not None else self.unit


class Scenario(BaseModel):
    """One question; `variants` run the same command with some options changed."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    title: str = Field(min_length=1, max_length=200)
    category: Literal["training", "inference", "extended", "stack", "user"] = "user"
    command: str = Field(min_length=1, max_length=40)
    model: dict[str, OptionValue] = Field(default_factory=dict)
    hardware: dict[str, OptionValue] = Field(default_factory=dict)
    plan: dict[str, OptionValue] = Field(default_factory=dict)
    workload: dict[str, OptionValue] = Field(default_factory=dict)
    options: dict[str, OptionValue] = Field(default_factory=dict)
    variants: dict[str, dict[str, OptionValue]] = Field(default_factory=dict, max_length=16)
    targets: list[Target] = Field(min_length=1, max_length=32)
    notes: str = ""
    exclusive: bool = False  # it measures this machine: the suite runs it with nothing beside

    @model_validator(mode="after")
    def _variants_exist(self) -> Scenario:
        for target in self.targets:
            for role, run in (("variant", target.variant), ("baseline", target.baseline)):
                if run is not None and run not in self.variants:
                    raise ValueError(f"target {target.name!r}: unknown {role} {run!r} "
                                     f"(variants: {', '.join(self.variants) or 'none'})")
            if target.baseline is not None and target.variant is None:
                raise ValueError(f"target {target.name!r}: a baseline needs a variant")
        return self

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError("letters, digits, '.', '_' or '-', at most 64 characters")
        return value

    @field_validator("model", mode="before")
    @classmethod
    def _model_name(cls, value: Any) -> Any:
        return {"model": value} if isinstance(value, str) else value

    def options_for(self, variant: str | None = None) -> dict[str, OptionValue]:
        """The command's flat options: the sections merged, then the variant's overrides."""
        merged: dict[str, OptionValue] = {}
        for section in SECTIONS:
            for key, value in getattr(self, section).items():
                if key in merged:
                    raise InputError(f"{section}.{key}", "set in two sections of the scenario")
                merged[key] = value
        if variant is not None:
            if variant not in self.variants:
                raise InputError("variant", f"unknown variant {variant!r}", sorted(self.variants))
            merged.update(self.variants[variant])
        return merged

    def runs(self) -> dict[str, dict[str, OptionValue]]:
        """Run name -> options: one run named 'main', or one per variant."""
        if not self.variants:
            return {"main": self.options_for()}
        return {name: self.options_for(name) for name in self.variants}

    def with_overrides(self, overrides: Mapping[str, OptionValue]) -> Scenario:
        """A copy with options replaced: `section.key` or a bare key (found in its section,
        else added to `options`)."""
        data = self.model_dump()
        for dotted, value in overrides.items():
            section, _, key = dotted.rpartition(".")
            if section and section not in SECTIONS:
                raise InputError(dotted, f"unknown section {section!r}", SECTIONS)
            if not section:
                section = next((s for s in SECTIONS if key in data[s]), "options")
            for other in SECTIONS:
                if other != section:
                    data[other].pop(key, None)
            data[section][key] = value
        return Scenario.model_validate(data)


def parse_scenario(text: str, origin: str = "<scenario>") -> Scenario:
    """Validate YAML text as a Scenario; safe loader only, size-limited."""
    if len(text.encode()) > MAX_SCENARIO_BYTES:
        raise InputError("file", f"{origin}: larger than {MAX_SCENARIO_BYTES} bytes")
    data = parse_user_yaml(text, "file", origin)
    if not isinstance(data, dict):
        raise InputError("file", f"{origin}: a scenario is a mapping of fields",
                         ["id", "title", "command", *SECTIONS, "variants", "targets"])
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc, origin=origin) from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate one scenario file."""
    text = read_user_text(path, "file", "a scenario YAML file", MAX_SCENARIO_BYTES)
    return parse_scenario(text, origin=str(path))
