"""How a model is split across GPUs."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from perfcast.errors import InputError
from perfcast.specs._model import ModelSpec

__all__ = ["ParallelPlan", "PipelineSchedule"]


class PipelineSchedule(StrEnum):
    GPIPE = "gpipe"
    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved-1f1b"


class ParallelPlan(BaseModel):
    """Degrees of each parallelism dimension plus ZeRO and pipeline settings."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tp: int = Field(default=1, gt=0)
    pp: int = Field(default=1, gt=0)
    dp: int = Field(default=1, gt=0)
    ep: int = Field(default=1, gt=0)
    cp: int = Field(default=1, gt=0)
    sp: bool = Field(default=False, description="Megatron sequence parallelism within the TP group")
    cp_algorithm: Literal["ring", "all-to-all"] = Field(
        default="ring", description="context parallelism: ring attention passing KV blocks "
        "(Megatron-Core CP) or all-to-all between sequence and head sharding "
        "(DeepSpeed-Ulysses; training only)")
    zero_stage: int = Field(default=0, ge=0, le=3)
    shard_group: int | None = Field(default=None, gt=0, description="data-parallel ranks "
                                    "each ZeRO/FSDP shard group spans: hybrid sharding (HSDP, "
                                    "PyTorch FSDP2 HYBRID_SHARD; DeepSpeed ZeRO++ hpZ) shards "
                                    "model states within groups of this many ranks and "
                                    "all-reduces gradients across the dp / shard_group "
                                    "replicas; None shards over all dp ranks")
    micro_batches: int = Field(default=1, gt=0)
    schedule: PipelineSchedule = PipelineSchedule.ONE_F_ONE_B
    virtual_stages: int = Field(default=1, gt=0, description="model chunks per stage (interleaved)")
    expert_tp: int | None = Field(default=None, gt=0, description="tensor-parallel degree of "
                                  "each expert where it is not the derived one: experts split "
                                  "by TP across the attention-DP ranks without EP (vLLM's DP "
                                  "without expert parallelism: tp x dp, ep 1)")
    expert_skew: float = Field(default=1.0, ge=1.0, le=64.0, description="routed tokens of the "
                               "most loaded EP rank / the mean rank's (1 = balanced routing); "
                               "MoE layers wait on that rank")

    @model_validator(mode="after")
    def _consistent(self) -> ParallelPlan:
        if self.sp and self.tp == 1:
            raise ValueError("sp (sequence parallelism) needs tp > 1")
        if self.virtual_stages > 1 and self.schedule != PipelineSchedule.INTERLEAVED:
            raise ValueError("virtual_stages > 1 needs schedule 'interleaved-1f1b'")
        if self.shard_group is not None:
            if self.zero_stage == 0:
                raise ValueError("shard_group (hybrid sharding) needs zero_stage >= 1")
            if self.dp % self.shard_group:
                raise ValueError(f"shard_group {self.shard_group} must divide dp ({self.dp})")
            if self.ep > 1:
                raise ValueError("shard_group (hybrid sharding) is modelled for dense layers "
                                 "(ep 1)")
        if self.expert_tp is not None and self.expert_tp * self.ep != self.tp * self.dp:
            raise ValueError(f"expert_tp x ep ({self.expert_tp} x {self.ep}) must equal tp x "
                             f"dp ({self.tp * self.dp}): every rank holds one expert shard")
        return self

    @property
    def shard_ranks(self) -> int:
        """Data-parallel ranks one shard of the model states spans (dp without hybrid
        sharding)."""
        return self.shard_group or self.dp

    @property
    def replicas(self) -> int:
        """Copies of the sharded model states: dp / shard_group under hybrid sharding, else 1."""
        return self.dp // self.shard_ranks

    @property
    def moe_tp(self) -> int:
        """Tensor-parallel degree of each expert: experts are split over the tp x dp ranks as
        ep x moe_tp (AIConfigurator's moe_tp x moe_ep = tp x attention_dp); tp without EP."""
        if self.expert_tp is not None:
            return self.expert_tp
        return max(self.tp * self.dp // self.ep, 1) if self.ep > 1 else self.tp

    @property
    def moe_token_ranks(self) -> int:
        """Ranks with distinct tokens meeting in an MoE layer: ep / tp (TP ranks share their
        tokens; the rest are data-parallel attention ranks, DeepSeek-style), moe_tp / tp when
        experts are TP-split across the DP ranks without EP (their tokens are gathered); 1
        otherwise."""
        if self.ep > 1:
            return max(self.ep // self.tp, 1)
        return max(self.moe_tp // self.tp, 1)

    @property
    def num_gpus(self) -> int:
        """GPUs used; EP reuses the DP x TP ranks (Megatron convention), so it adds none."""
        return self.tp * self.pp * self.dp * self.cp

    def check(self, model: ModelSpec) -> None:
        """Raise an InputError when the plan cannot split this model."""
        _divides("tp", self.tp, model.num_heads, "num_attention_heads")
        if self.cp > 1 and self.cp_algorithm == "all-to-all":
            _divides("cp", self.tp * self.cp, model.num_heads,
                     "num_attention_heads (all-to-all CP splits the heads tp x cp ways)")
        if model.num_kv_heads >= self.tp:
            _divides("tp", self.tp, model.num_kv_heads, "num_key_value_heads")
        elif self.tp % model.num_kv_heads:
            raise InputError("tp", f"{self.tp} must be a multiple of num_key_value_heads "
                             f"({model.num_kv_heads}) when larger", _divisors(model.num_heads))
        if self.pp > model.num_layers:
            raise InputError("pp", f"{self.pp} exceeds the model's {model.num_layers} layers",
                             f"1..{model.num_layers}")
        if self.ep > 1:
            if model.moe is None:
                raise InputError("ep", f"{model.name} has no experts", "1")
            _divides("ep", self.ep, model.moe.num_experts, "num_experts")


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _divides(field: str, degree: int, size: int, what: str) -> None:
    if size % degree:
        raise InputError(field, f"{degree} does not divide {what} ({size})", _divisors(size))
