"""A pool of a disaggregated deployment (`PoolLayout`): its workers, their parallelism and
batch limits, and the compact text `2x(tp8,ep8,dp8)` it is written in. Kept apart from the
replay (serve._disagg) so that a request naming pools loads no simulator."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from perfcast.errors import InputError
from perfcast.serve._config import ServeConfig

__all__ = ["MAX_POOL_GPUS", "POOL_FORMS", "POOL_KEYS", "PoolLayout"]

MAX_POOL_GPUS = 1_000_000  # as the API's MAX_GPUS: a typo's bound, not a modelling limit
# Compact keys -> PoolLayout fields (the field names themselves are accepted too).
POOL_KEYS = {"tp": "tp", "pp": "pp", "dp": "attention_dp", "ep": "ep", "moe_tp": "moe_tp",
             "batch": "max_batch", "tokens": "max_batch_tokens"}
_SHORT = {field: key for key, field in POOL_KEYS.items()}
_ITEM = re.compile(r"^([a-z_]+?)=?(\d+)$")
POOL_FORMS = ("WORKERSxTP (e.g. 2x4)", "WORKERSx(tp8,ep8,dp8,moe_tp1,batch256,tokens8192) "
              "(any of the keys; = optional: tp=8)")


class PoolLayout(BaseModel):
    """One pool of a disaggregated deployment: `workers` engine instances, each `tp` x `pp` x
    `attention_dp` GPUs; MoE experts split over `ep` ranks x `moe_tp` (None: tp x
    attention_dp / ep, the engines' default, AIConfigurator's moe_tp x moe_ep = tp x
    attention_dp); `max_batch` sequences per attention-DP rank and `max_batch_tokens` per
    step (None: the deployment's engine settings). Every attention-DP rank is a replica of
    the pool (workers x attention_dp replicas behind its router)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workers: int = Field(1, ge=1, le=MAX_POOL_GPUS, description="engine instances")
    tp: int = Field(1, ge=1, le=MAX_POOL_GPUS, description="attention tensor parallelism")
    pp: int = Field(1, ge=1, le=MAX_POOL_GPUS, description="pipeline stages")
    ep: int = Field(1, ge=1, le=MAX_POOL_GPUS, description="expert-parallel ranks")
    attention_dp: int = Field(1, ge=1, le=MAX_POOL_GPUS, description="attention-DP ranks")
    moe_tp: int | None = Field(None, ge=1, le=MAX_POOL_GPUS, description="TP of each expert")
    max_batch: int | None = Field(None, ge=1, le=MAX_POOL_GPUS, description="sequences per "
                                  "attention-DP rank per step")
    max_batch_tokens: int | None = Field(None, ge=1, le=10_000_000, description="tokens per "
                                         "step")

    @model_validator(mode="before")
    @classmethod
    def _compact(cls, value: Any) -> Any:
        return _parse(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _experts(self) -> PoolLayout:
        """Experts fill the worker's tp x attention_dp GPUs: ep divides them, and
        moe_tp x ep (when given) equals them."""
        ranks = self.tp * self.attention_dp
        if ranks % self.ep:
            raise ValueError(f"ep {self.ep} must divide tp x dp = {ranks}")
        if self.moe_tp is not None and self.moe_tp * self.ep != ranks:
            raise ValueError(f"moe_tp x ep = {self.moe_tp} x {self.ep} must equal tp x dp = "
                             f"{ranks} (every GPU of a worker holds one expert shard)")
        return self

    @classmethod
    def parse(cls, value: Any, field: str) -> PoolLayout:
        """A layout from its compact text, a mapping of its fields, or itself; a bad one is
        an InputError naming `field`."""
        if isinstance(value, PoolLayout):
            return value
        try:
            return cls.model_validate(value)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            msg = err["msg"].removeprefix("Value error, ")
            raise InputError(field, f"{value!r}: {where + ': ' if where else ''}{msg}",
                             POOL_FORMS) from None

    @property
    def replicas(self) -> int:
        """Replicas behind the pool's router: one per attention-DP rank of every worker."""
        return self.workers * self.attention_dp

    @property
    def gpus(self) -> int:
        return self.workers * self.tp * self.pp * self.attention_dp

    def config(self, base: ServeConfig) -> ServeConfig:
        """`base` (model, GPU, scheduler, ...) deployed as this pool; its batch limits where
        the pool sets none."""
        fields = {"tp": self.tp, "pp": self.pp, "ep": self.ep, "moe_tp": self.moe_tp,
                  "attention_dp": self.attention_dp, "replicas": self.replicas}
        for name in ("max_batch", "max_batch_tokens"):
            if getattr(self, name) is not None:
                fields[name] = getattr(self, name)
        return ServeConfig(**(base.model_dump() | fields))

    def __str__(self) -> str:
        """The compact form `parse` reads back: `2x4` for workers x TP alone, else
        `2x(tp8,ep8,dp8,...)` with the fields that are not their defaults."""
        set_ = {k: v for k, v in self.model_dump(exclude_defaults=True).items()
                if k != "workers"}
        if set(set_) <= {"tp"}:
            return f"{self.workers}x{self.tp}"
        items = ",".join(f"{key}{set_[field]}" for key, field in POOL_KEYS.items()
                         if field in set_)
        return f"{self.workers}x({items})"


def _parse(text: str) -> dict[str, Any]:
    """`2x4` -> workers 2, tp 4; `2x(tp8,ep8,dp8)` or `(tp8,ep8)` (one worker) -> fields."""
    raw = text.strip().lower().replace(" ", "")
    head, sep, rest = raw.partition("x")
    if sep and head.isdigit() and rest.isdigit():
        return {"workers": int(head), "tp": int(rest)}
    if not (sep and head.isdigit()):
        head, rest = "1", raw
    rest = rest.removeprefix("(").removesuffix(")")
    fields: dict[str, Any] = {"workers": int(head)}
    for item in filter(None, rest.split(",")):
        match = _ITEM.match(item)
        key = match and POOL_KEYS.get(match[1], match[1] if match[1] in _SHORT else None)
        if not key or key in fields:
            raise ValueError(f"{item!r} is not one of {', '.join(POOL_KEYS)} with a number"
                             + (" (given twice)" if key else ""))
        fields[key] = int(match[2])
    if len(fields) == 1:
        raise ValueError(f"expected {POOL_FORMS[0]} or {POOL_FORMS[1]}")
    return fields
