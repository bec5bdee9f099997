"""How overlapped collectives slow the compute they hide under.

Two terms, each charged on the seconds of communication the schedule hides under compute
(every collective's full time minus its exposed part, pipeline sends excepted):

- SM contention (physical, every stack): an NCCL collective runs one thread block per
  channel, each resident on one SM for the collective's duration, so concurrent compute
  kernels get (SMs - channels) / SMs of the GPU and lose channels / SMs x the hidden seconds.
  16 channels: NCCL's choice on 8-GPU NVSwitch nodes ("16 coll channels" in NCCL_DEBUG=INFO
  of an 8-GPU HGX node, github.com/NVIDIA/nccl/issues/892).
- TP communication overlap (an option, off by default as in Megatron-LM): TP collectives
  pipelined with the GEMMs around them hide, paying contention instead of their time.
- Parameter all-gather overlap (an option, off by default): ZeRO-1/2's post-step gather
  hides under the next forward but its first bucket.
- Overlap loss (fitted per stack): seconds a framework adds per hidden second beyond
  contention, from its measured runs (e.g. llm-foundry's FSDP1 all-gathers, issued on demand
  and rate-limited, hide far less than an ideal prefetch). 0 for stacks without measured runs.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DEFAULT_NCCL_CHANNELS", "OVERLAP_PARTS", "CommOverlap"]

OVERLAP_PARTS = ("contention_s", "overlap_loss_s")  # breakdown parts of the iteration

DEFAULT_NCCL_CHANNELS = 16  # NCCL on 8-GPU NVSwitch nodes (github.com/NVIDIA/nccl/issues/892)


class CommOverlap(BaseModel):
    """What hiding a collective under compute costs (module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    nccl_channels: int = Field(default=DEFAULT_NCCL_CHANNELS, ge=0, le=64, description=(
        "SMs each running collective occupies (NCCL channels; 0 = no SM contention)"))
    overlap_loss: float = Field(default=0.0, ge=0.0, le=10.0, description=(
        "seconds added per hidden second of communication beyond SM contention (fitted per "
        "stack on its measured runs; 0 = ideal overlap)"))
    tp_comm_overlap: bool = Field(default=False, description=(
        "TP all-gathers / reduce-scatters pipelined with the layer's GEMMs (Megatron-Core "
        "--tp-comm-overlap, Transformer Engine userbuffers); off: exposed, Megatron-LM's "
        "default"))
    param_gather_overlap: bool = Field(default=False, description=(
        "ZeRO-1/2's post-step parameter all-gather overlapped with the next iteration's "
        "forward (Megatron-Core --overlap-param-gather); off: it follows the optimizer step"))
    provenance: str = Field(default="NCCL channel count; ideal overlap", min_length=1)

    def sm_share(self, sm_count: int) -> float:
        """Share of the GPU's SMs the collectives hold while they run."""
        return min(self.nccl_channels / max(sm_count, 1), 1.0)
