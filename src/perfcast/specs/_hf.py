"""Map a HuggingFace config.json onto ModelSpec fields, across the common model_type dialects."""

from __future__ import annotations

from typing import Any

from perfcast.errors import InputError
from perfcast.specs._vision import vision_fields

__all__ = ["spec_fields"]

_GATED_TYPES = {
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "deepseek_v2",
    "deepseek_v3", "gemma", "gemma2", "phi3", "internlm", "internlm2", "olmo", "olmo2",
}
# transformers' LlamaConfig defaults (configuration_llama.py), for diff-serialised text_config.
_TEXT_DEFAULTS = {"llama": {
    "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "hidden_act": "silu", "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "vocab_size": 32000,
}}
_ENCODER_TYPES = {"bert", "roberta", "deberta", "deberta-v2", "electra"}


def _first(config: dict[str, Any], *keys: str, default: Any = None, required: bool = True) -> Any:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    if default is None and required:
        raise InputError(
            "model_config", f"config.json has none of the keys {', '.join(keys)}",
            "a HuggingFace config.json of a transformer"
        )
    return default


def _section(config: dict[str, Any], key: str) -> dict[str, Any] | None:
    """A nested config (text_config, vision_config, attn_config, ...): an object or absent."""
    value = config.get(key)
    if value is not None and not isinstance(value, dict):
        raise InputError(f"model_config.{key}", f"must be a JSON object, got {value!r}",
                         "an object of config keys")
    return value


def _moe_fields(config: dict[str, Any], intermediate: int) -> dict[str, Any] | None:
    experts = _first(config, "n_routed_experts", "num_local_experts", "num_experts",
                     required=False)
    if not experts or experts <= 1:
        return None
    return {
        "num_experts": experts,
        "experts_per_token": _first(config, "num_experts_per_tok", "moe_top_k", default=1),
        "expert_intermediate_size": _first(config, "moe_intermediate_size", default=intermediate),
        "num_shared_experts": _first(config, "n_shared_experts", default=0, required=False),
        "first_dense_layers": _first(config, "first_k_dense_replace", default=0, required=False),
        "layer_freq": _first(config, "moe_layer_freq", "decoder_sparse_step", default=1),
    }


def _mla_fields(config: dict[str, Any]) -> dict[str, Any] | None:
    if not config.get("kv_lora_rank"):
        return None
    fields = {k: config.get(k) for k in (
        "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")}
    for key, value in fields.items():
        if (value is None and key != "q_lora_rank") or value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InputError(f"model_config.{key}", f"must be a positive integer with "
                             f"kv_lora_rank (MLA), got {value!r}", ">= 1")
    return fields


def _switch_fields(config: dict[str, Any]) -> dict[str, Any]:
    """Switch Transformers (T5 dialect): encoder-decoder with top-1 experts every n-th layer."""
    d_ff = config["d_ff"]
    return {
        "kind": "encoder-decoder",
        "hidden_size": config["d_model"],
        "num_layers": config.get("num_decoder_layers") or config["num_layers"],
        "num_encoder_layers": config["num_layers"],
        "num_heads": config["num_heads"],
        "num_kv_heads": config["num_heads"],
        "head_dim": config["d_kv"],
        "intermediate_size": d_ff,
        "vocab_size": _first(config, "vocab_size"),
        "gated_mlp": bool(config.get("is_gated_act", False)),
        "activation": config.get("dense_act_fn", "relu"),
        "norm": "rmsnorm",  # T5LayerNorm is a scale-only RMS norm
        "position": "relative",
        "tied_embeddings": config.get("tie_word_embeddings", True),
        "moe": {
            "num_experts": config["num_experts"],
            "experts_per_token": 1,
            "expert_intermediate_size": d_ff,
            "layer_freq": config.get("decoder_sparse_step", 2),
        },
    }


def _mpt_fields(config: dict[str, Any]) -> dict[str, Any]:
    """MPT (MosaicML llm-foundry MPTConfig): non-gated GELU FFN of expansion_ratio x d_model,
    LayerNorm, tied embeddings; ALiBi (a bias inside attention, no position kernel), RoPE,
    or learned positions, which MPTConfig turns off when alibi or rope is on. Missing keys
    take MPTConfig's defaults (configuration_mpt.py: learned_pos_emb and bias on, alibi
    off, vocab 50368, tied embeddings)."""
    attn = _section(config, "attn_config") or {}
    ffn = _section(config, "ffn_config") or {}
    d_model, heads = _first(config, "d_model"), _first(config, "n_heads")
    kv_heads = {"multiquery_attention": 1,
                "grouped_query_attention": attn.get("kv_n_heads") or heads}.get(
        attn.get("attn_type"), heads)
    ratio = config.get("expansion_ratio", ffn.get("expansion_ratio", 4))
    rope, alibi = bool(attn.get("rope")), bool(attn.get("alibi"))
    learned = bool(config.get("learned_pos_emb", True)) and not (rope or alibi)
    window = attn.get("sliding_window_size") or -1
    return {
        "kind": "decoder",
        "hidden_size": d_model,
        "num_layers": _first(config, "n_layers"),
        "num_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": d_model // heads,
        "intermediate_size": int(ratio * d_model),
        "vocab_size": config.get("vocab_size", 50368),
        "max_position_embeddings": config.get("max_seq_len", 2048),
        "gated_mlp": ffn.get("ffn_type") == "mptglu",
        "activation": "gelu",
        "norm": "rmsnorm" if "rmsnorm" in str(config.get("norm_type", "")) else "layernorm",
        "position": "rope" if rope else "learned" if learned else "relative",
        "tied_embeddings": bool(config.get("tie_word_embeddings", True)),
        "sliding_window": window if window > 0 else None,
        "attention_bias": not config.get("no_bias", False),
    }


def _vit_fields(config: dict[str, Any]) -> dict[str, Any]:
    """ViT (transformers ViTConfig; defaults from configuration_vit.py for missing keys): a
    pre-LN encoder over (image/patch)^2 patch tokens plus the class token, learned
    positions, a plain GELU MLP, and a linear classifier on the class token, whose classes
    (`num_labels`, else len(id2label), else PretrainedConfig's 2) take vocab_size's place."""
    image = {"image_size": config.get("image_size", 224),
             "patch_size": config.get("patch_size", 16),
             "num_channels": config.get("num_channels", 3)}
    for key, value in image.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"model_config.{key}", f"must be a positive integer, got "
                             f"{value!r}", ">= 1")
    if image["image_size"] % image["patch_size"]:
        raise InputError("model_config.patch_size", f"{image['patch_size']} does not tile "
                         f"{image['image_size']}-pixel images", "a divisor of image_size")
    labels = config.get("num_labels") or len(_section(config, "id2label") or {}) or 2
    hidden = config.get("hidden_size", 768)
    heads = config.get("num_attention_heads", 12)
    return {
        "kind": "encoder",
        "hidden_size": hidden,
        "num_layers": config.get("num_hidden_layers", 12),
        "num_heads": heads,
        "num_kv_heads": heads,
        "head_dim": hidden // heads,
        "intermediate_size": config.get("intermediate_size", 3072),
        "vocab_size": labels,
        "max_position_embeddings": (image["image_size"] // image["patch_size"]) ** 2 + 1,
        "activation": str(config.get("hidden_act", "gelu")),
        "norm": "layernorm",
        "position": "learned",
        "attention_bias": bool(config.get("qkv_bias", True)),
        "image": image,
    }


def spec_fields(config: dict[str, Any]) -> dict[str, Any]:
    """ModelSpec keyword arguments from a parsed config.json."""
    vision_of = None
    if "text_config" in config and "hidden_size" not in config:  # LLaVA-style wrappers
        text = _section(config, "text_config") or {}
        _section(config, "vision_config")
        # HF serialises nested configs as a diff against the class defaults: restore them.
        vision_of, config = config, {**_TEXT_DEFAULTS.get(text.get("model_type"), {}), **text}
    model_type = str(config.get("model_type", "")).lower()
    if model_type == "switch_transformers":
        return {**_switch_fields(config), "model_type": model_type}
    if model_type == "mpt":
        return {**_mpt_fields(config), "model_type": model_type}
    if model_type == "vit":
        return {**_vit_fields(config), "model_type": model_type}

    hidden = _first(config, "hidden_size", "n_embd", "d_model")
    heads = _first(config, "num_attention_heads", "n_head", "num_heads")
    kv_heads = _first(config, "num_key_value_heads", "multi_query_group_num", default=heads)
    if config.get("multi_query"):
        kv_heads = 1
    intermediate = _first(config, "intermediate_size", "ffn_dim", "n_inner", default=4 * hidden)
    act = str(_first(config, "hidden_act", "activation_function", default="gelu"))
    mla = _mla_fields(config)
    head_dim = _first(config, "head_dim", default=hidden // heads)
    if mla:
        head_dim = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]
    is_gpt2_like = model_type in {"gpt2", "opt", "gpt_neox", "gptj"} or model_type in _ENCODER_TYPES
    use_sliding = config.get("use_sliding_window", True)
    return {
        "model_type": model_type,
        "kind": "encoder" if model_type in _ENCODER_TYPES else "decoder",
        "hidden_size": hidden,
        "num_layers": _first(config, "num_hidden_layers", "n_layer", "num_layers"),
        "num_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate_size": intermediate,
        "vocab_size": _first(config, "vocab_size"),
        "max_position_embeddings": _first(
            config, "max_position_embeddings", "n_positions", default=0, required=False) or None,
        "gated_mlp": model_type in _GATED_TYPES or (
            not is_gpt2_like and act in {"silu", "swiglu"}),
        "activation": act,
        "norm": "rmsnorm" if "rms_norm_eps" in config else "layernorm",
        "position": "learned" if is_gpt2_like and model_type != "gpt_neox" else "rope",
        "tied_embeddings": bool(config.get(
            "tie_word_embeddings", model_type in {"gpt2", "opt"} or model_type in _ENCODER_TYPES)),
        "sliding_window": config.get("sliding_window") if use_sliding else None,
        "attention_bias": bool(config.get("attention_bias", model_type in {"qwen2", "gpt2"})),
        "moe": _moe_fields(config, intermediate),
        "mla": mla,
        "vision": vision_fields(vision_of, hidden) if vision_of else None,
    }
