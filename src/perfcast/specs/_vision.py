"""A multimodal model's vision tower and projector, read from a LLaVA-style `vision_config`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["VisionSpec", "vision_fields"]

# transformers' CLIPVisionConfig defaults (configuration_clip.py) for the keys a diff-serialised
# vision_config leaves out.
_VISION_DEFAULTS = {"clip_vision_model": {
    "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
    "num_attention_heads": 12, "num_channels": 3, "image_size": 224, "patch_size": 32,
    "hidden_act": "quick_gelu",
}}


class VisionSpec(BaseModel):
    """A ViT encoder (CLIP-style: patch embedding, class token, pre-norm LayerNorm blocks with
    a plain MLP) followed by LLaVA's 2-layer MLP projector into the language model's width."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_type: str = "clip_vision_model"
    hidden_size: int = Field(gt=0)
    num_layers: int = Field(ge=0, description="encoder layers that run: up to the feature "
                            "layer the projector reads (vLLM drops the ones after it)")
    num_heads: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    image_size: int = Field(gt=0, description="pixels per side of the (square) input image")
    patch_size: int = Field(gt=0)
    num_channels: int = Field(default=3, gt=0)
    activation: str = "quick_gelu"
    projector_hidden_size: int = Field(gt=0, description="projector width = the LLM's hidden")
    projector_activation: str = "gelu"
    select_strategy: Literal["default", "full"] = Field(
        default="default", description="'default' drops the class token's feature")

    @property
    def patches(self) -> int:
        """Patch tokens per image: (image_size / patch_size)^2 (ViT, Dosovitskiy et al. 2021)."""
        return (self.image_size // self.patch_size) ** 2

    @property
    def encoder_tokens(self) -> int:
        """Tokens through the encoder per image: the patches plus the class token."""
        return self.patches + 1

    @property
    def image_tokens(self) -> int:
        """Tokens one image adds to the LLM prompt."""
        return self.patches + (self.select_strategy == "full")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    def encoder_params(self) -> int:
        """Weights of the layers that run, the patch/class/position embeddings and the
        pre-LayerNorm (biases included: CLIP's linears all have them)."""
        h, i = self.hidden_size, self.intermediate_size
        layer = 4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h  # attention, MLP, 2 LayerNorms
        patch = self.num_channels * self.patch_size**2 * h
        return self.num_layers * layer + patch + h + self.encoder_tokens * h + 2 * h

    def projector_params(self) -> int:
        h, p = self.hidden_size, self.projector_hidden_size
        return h * p + p + p * p + p

    def params(self) -> int:
        return self.encoder_params() + self.projector_params()


def vision_fields(config: dict[str, Any], text_hidden: int) -> dict[str, Any] | None:
    """VisionSpec keyword arguments from a LLaVA-style config.json; None without a
    `vision_config` or with one this model cannot price (a tower other than CLIP's, several
    feature layers), so such configs still load as their language model."""
    raw = config.get("vision_config")
    vtype = str((raw or {}).get("model_type", "clip_vision_model"))
    if not raw or vtype not in _VISION_DEFAULTS:
        return None
    vc = {**_VISION_DEFAULTS[vtype], **raw}
    layers = vc["num_hidden_layers"]
    feature = config.get("vision_feature_layer", -1)
    strategy = config.get("vision_feature_select_strategy", "default")
    if not isinstance(feature, int) or not -layers - 1 <= feature <= layers or strategy not in (
            "default", "full"):
        return None
    # hidden_states[0] is the embeddings, hidden_states[k] layer k's output (HF CLIP).
    run = layers + 1 + feature if feature < 0 else feature
    return {
        "model_type": vtype, "hidden_size": vc["hidden_size"], "num_layers": run,
        "num_heads": vc["num_attention_heads"], "intermediate_size": vc["intermediate_size"],
        "image_size": vc["image_size"], "patch_size": vc["patch_size"],
        "num_channels": vc["num_channels"], "activation": vc["hidden_act"],
        "projector_hidden_size": text_hidden,
        "projector_activation": config.get("projector_hidden_act", "gelu"),
        "select_strategy": strategy,
    }
