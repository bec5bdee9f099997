"""Latent-diffusion pipelines read from diffusers/transformers config.json files.

A pipeline (SDXL: `model_index.json` + `unet/`, `vae/`, `text_encoder/`, `text_encoder_2/`)
is three kinds of network: the denoising UNet (`UNet2DConditionModel`), the VAE decoder
(`AutoencoderKL`) and CLIP text encoders. Only the fields that set shapes are read; the
rest of each file is kept out (diffusers configs carry many runtime switches). Diffusion
pipelines have their own small catalog (`data/models/diffusion_index.json`) because the LLM
catalog's entries must each parse as a `ModelSpec`.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perfcast.errors import InputError, close_matches, from_validation_error
from perfcast.specs._catalog import _DATA, _key

__all__ = ["DiffusionPipelineSpec", "TextEncoderConfig", "UNetConfig", "VAEConfig",
           "diffusion_model_entries", "diffusion_model_names", "get_diffusion_model"]

DOWN_BLOCKS = ("DownBlock2D", "CrossAttnDownBlock2D")
UP_BLOCKS = ("UpBlock2D", "CrossAttnUpBlock2D")
MID_BLOCKS = ("UNetMidBlock2DCrossAttn",)


def _per_level(value: int | tuple[int, ...], levels: int, field: str) -> tuple[int, ...]:
    """diffusers' rule: an int applies to every down block, a list names each one."""
    if isinstance(value, int):
        return (value,) * levels
    if len(value) != levels:
        raise InputError(field, f"has {len(value)} entries for {levels} down blocks",
                         f"an int or {levels} values")
    return tuple(value)


class UNetConfig(BaseModel):
    """The shape fields of a diffusers `UNet2DConditionModel` config."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    in_channels: int = Field(gt=0)
    out_channels: int = Field(gt=0)
    block_out_channels: tuple[int, ...] = Field(min_length=1)
    layers_per_block: int = Field(gt=0)
    transformer_layers_per_block: int | tuple[int, ...] = 1
    attention_head_dim: int | tuple[int, ...] = 8
    num_attention_heads: int | tuple[int, ...] | None = None
    cross_attention_dim: int = Field(gt=0)
    down_block_types: tuple[str, ...]
    up_block_types: tuple[str, ...]
    mid_block_type: str = "UNetMidBlock2DCrossAttn"
    norm_num_groups: int = Field(default=32, gt=0)
    addition_embed_type: str | None = None
    addition_time_embed_dim: int | None = None
    projection_class_embeddings_input_dim: int | None = None
    sample_size: int = Field(gt=0)
    use_linear_projection: bool = False
    conv_in_kernel: int = 3
    conv_out_kernel: int = 3

    def check(self) -> UNetConfig:
        """Refuse block types the op table does not know, naming the field."""
        levels = len(self.block_out_channels)
        for field, types, allowed in (("down_block_types", self.down_block_types, DOWN_BLOCKS),
                                      ("up_block_types", self.up_block_types, UP_BLOCKS)):
            if len(types) != levels:
                raise InputError(f"unet.{field}", f"{len(types)} blocks for {levels} widths",
                                 f"{levels} entries")
            bad = [t for t in types if t not in allowed]
            if bad:
                raise InputError(f"unet.{field}", f"unsupported block {bad[0]!r}", allowed)
        if self.mid_block_type not in MID_BLOCKS:
            raise InputError("unet.mid_block_type", f"unsupported {self.mid_block_type!r}",
                             MID_BLOCKS)
        if self.addition_embed_type not in (None, "text_time"):
            raise InputError("unet.addition_embed_type",
                             f"unsupported {self.addition_embed_type!r}", "null, text_time")
        self.heads()
        self.transformer_layers()
        return self

    def heads(self) -> tuple[int, ...]:
        """Attention heads per level. diffusers reads `attention_head_dim` as the head count
        when `num_attention_heads` is unset (a naming slip it keeps for old checkpoints)."""
        value = self.num_attention_heads or self.attention_head_dim
        return _per_level(value, len(self.block_out_channels), "unet.attention_head_dim")

    def transformer_layers(self) -> tuple[int, ...]:
        return _per_level(self.transformer_layers_per_block, len(self.block_out_channels),
                          "unet.transformer_layers_per_block")

    @property
    def time_embed_dim(self) -> int:
        return 4 * self.block_out_channels[0]  # diffusers: block_out_channels[0] * 4

    @property
    def downsamples(self) -> int:
        return len(self.block_out_channels) - 1  # every down block but the last halves H, W


class VAEConfig(BaseModel):
    """The decoder's shape fields of a diffusers `AutoencoderKL` config."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    block_out_channels: tuple[int, ...] = Field(min_length=1)
    layers_per_block: int = Field(gt=0)
    latent_channels: int = Field(gt=0)
    out_channels: int = Field(gt=0)
    norm_num_groups: int = Field(default=32, gt=0)
    scaling_factor: float = Field(gt=0)
    force_upcast: bool = True
    mid_block_add_attention: bool = True

    @property
    def scale_factor(self) -> int:
        """Pixels per latent pixel along an edge: 2^(blocks - 1) (diffusers vae_scale_factor)."""
        return 2 ** (len(self.block_out_channels) - 1)


class TextEncoderConfig(BaseModel):
    """A transformers `CLIPTextConfig`: a causal pre-LN transformer over 77 tokens."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    architectures: tuple[str, ...] = ("CLIPTextModel",)
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    num_hidden_layers: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    max_position_embeddings: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    projection_dim: int = Field(gt=0)
    hidden_act: str = "quick_gelu"

    @property
    def with_projection(self) -> bool:
        """CLIPTextModelWithProjection adds text_projection on the pooled token."""
        return "CLIPTextModelWithProjection" in self.architectures


class DiffusionPipelineSpec(BaseModel):
    """A text-to-image latent-diffusion pipeline: text encoders -> UNet x steps -> VAE."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    unet: UNetConfig
    vae: VAEConfig
    text_encoders: tuple[TextEncoderConfig, ...] = ()
    force_zeros_for_empty_prompt: bool = False

    @property
    def resolution_multiple(self) -> int:
        """Image edges must divide by the VAE factor times the UNet's downsamplings."""
        return self.vae.scale_factor * 2 ** self.unet.downsamples

    @property
    def default_resolution(self) -> int:
        return self.unet.sample_size * self.vae.scale_factor


@cache
def _index() -> tuple[dict[str, dict], dict[str, str]]:
    entries, index = {}, {}
    for entry in json.loads((_DATA / "models" / "diffusion_index.json").read_text())["models"]:
        entries[entry["name"]] = entry
        for alias in [entry["name"], *entry.get("aliases", [])]:
            index[_key(alias)] = entry["name"]
    return entries, index


def diffusion_model_names() -> list[str]:
    return list(_index()[0])


def diffusion_model_entries() -> list[dict]:
    """Catalog rows: name, hf_id, aliases, components, published parameter counts, source."""
    return list(_index()[0].values())


def _read(folder: str, rel: str) -> dict[str, Any]:
    return json.loads((_DATA / "models" / folder / rel).read_text())


@cache
def get_diffusion_model(name: str) -> DiffusionPipelineSpec:
    """A shipped diffusion pipeline by catalog name or alias (e.g. `sdxl-base`)."""
    entries, index = _index()
    canonical = index.get(_key(str(name)))
    if canonical is None:
        hint = close_matches(str(name), list(entries))
        raise InputError("model", f"unknown diffusion model {name!r}"
                         + (f"; did you mean {', '.join(hint)}?" if hint else ""), list(entries))
    parts = entries[canonical]["components"]
    pipeline = _read(canonical, parts["pipeline"])
    try:
        spec = DiffusionPipelineSpec(
            name=canonical, unet=UNetConfig(**_read(canonical, parts["unet"])),
            vae=VAEConfig(**_read(canonical, parts["vae"])),
            text_encoders=tuple(TextEncoderConfig(**_read(canonical, p))
                                for p in parts.get("text_encoders", [])),
            force_zeros_for_empty_prompt=bool(pipeline.get("force_zeros_for_empty_prompt")))
    except ValidationError as exc:
        raise from_validation_error(exc, prefix=f"{canonical}.", default="config") from None
    spec.unet.check()
    return spec
