"""Per-layer structure of a HuggingFace config: which token mixer and which FFN each decoder
layer has, read from whichever dialect the config speaks (`layer_types`, Nemotron-H's
pattern string, Jamba's periods, MiniMax's `attn_type_list`, Qwen3-Next's interval, Gemma's
alternation, Llama 4's chunked/NoPE layers, MoE layer lists), and the recurrent or sparse
mixer's shapes. Each rule cites the transformers modelling file it follows."""

from __future__ import annotations

from typing import Any

from perfcast.errors import InputError

__all__ = ["UNMODELLED", "layer_pattern", "linear_mixer_fields", "moe_layer_fields",
           "refuse_unmodelled", "sparse_fields"]

_LAYER_TYPES = {"full_attention": "full", "attention": "full", "global": "full",
                "sliding_attention": "sliding", "local": "sliding",
                "chunked_attention": "chunked", "linear_attention": "linear",
                "mamba": "mamba", "mamba2": "mamba"}
DSA_TYPES = frozenset({"deepseek_v32", "glm_moe_dsa"})  # sparse attention by architecture
# Nemotron-H `hybrid_override_pattern` (configuration_nemotron_h.py): one character a block.
_NEMOTRON_H = {"M": ("mamba", "none"), "*": ("full", "none"), "-": ("none", "dense"),
               "E": ("none", "moe")}


def _int(config: dict[str, Any], key: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"model_config.{key}", f"must be a non-negative integer, got "
                         f"{value!r}", ">= 0")
    return value


def _periodic(n: int, period: int, offset: int) -> list[bool]:
    return [i % period == offset for i in range(n)]


def layer_pattern(config: dict[str, Any], model_type: str, n: int,
                  window: int | None) -> tuple[tuple | None, tuple | None]:
    """(mixer per layer or None, FFN per layer or None); None where every layer is alike
    (all full attention, or all sliding when `window` is set) or the MoE rule decides."""
    if config.get("hybrid_override_pattern"):
        pattern = str(config["hybrid_override_pattern"])
        bad = sorted(set(pattern) - set(_NEMOTRON_H))
        if bad or len(pattern) != n:
            raise InputError("model_config.hybrid_override_pattern",
                             f"must be {n} characters of {''.join(_NEMOTRON_H)}, got "
                             f"{len(pattern)} characters" + (f" with {bad}" if bad else ""),
                             list(_NEMOTRON_H))
        kinds = [_NEMOTRON_H[c] for c in pattern]
        return tuple(k[0] for k in kinds), tuple(k[1] for k in kinds)
    lin = config.get("linear_attn_config")
    if isinstance(lin, dict) and lin.get("kda_layers"):  # Kimi Linear: 1-based KDA layers
        kda = {int(i) - 1 for i in lin["kda_layers"]}
        if max(kda) >= n or min(kda) < 0:
            raise InputError("model_config.linear_attn_config.kda_layers",
                             f"must be layer numbers 1..{n}", f"1..{n}")
        return tuple("linear" if i in kda else "full" for i in range(n)), None
    if config.get("layer_types") is not None:
        types = config["layer_types"]
        if not isinstance(types, list) or len(types) != n:
            raise InputError("model_config.layer_types", f"must list one type for each of the "
                             f"{n} layers", sorted(_LAYER_TYPES))
        unknown = sorted({str(t) for t in types} - set(_LAYER_TYPES))
        if unknown:
            raise InputError("model_config.layer_types", f"unknown layer types {unknown}",
                             sorted(_LAYER_TYPES))
        return _only_if_mixed(tuple(_LAYER_TYPES[t] for t in types), window), None
    if "attn_layer_period" in config:  # Jamba: attention at i % period == offset, else Mamba
        attn = _periodic(n, _int(config, "attn_layer_period"), _int(config, "attn_layer_offset"))
        return tuple("full" if a else "mamba" for a in attn), None
    if config.get("attn_type_list") is not None:  # MiniMax-M1/Text-01: 0 lightning, 1 softmax
        types = config["attn_type_list"]
        if not isinstance(types, list) or len(types) != n or set(types) - {0, 1}:
            raise InputError("model_config.attn_type_list", f"must list 0 or 1 for each of "
                             f"the {n} layers", [0, 1])
        return tuple("full" if t else "linear" for t in types), None
    if config.get("full_attention_interval"):  # Qwen3-Next: every k-th layer full attention
        k = _int(config, "full_attention_interval")
        return tuple("full" if (i + 1) % k == 0 else "linear" for i in range(n)), None
    if config.get("index_topk"):  # DeepSeek-V3.2 / GLM-5 DSA: every layer sparse
        return ("sparse",) * n, None
    if model_type in DSA_TYPES:
        raise InputError("model_config.index_topk", f"missing: {model_type} attention is "
                         "DeepSeek Sparse Attention, priced from its indexer's keys",
                         "index_topk, index_n_heads and index_head_dim")
    if model_type == "gemma2" and window:  # modeling_gemma2.py: even layers slide
        return tuple("sliding" if i % 2 == 0 else "full" for i in range(n)), None
    if model_type in ("gemma3", "gemma3_text") and window:  # sliding_window_pattern - 1 local
        p = _int(config, "sliding_window_pattern", 6)  # : 1 global (configuration_gemma3.py)
        return tuple("sliding" if (i + 1) % p else "full" for i in range(n)), None
    if config.get("attention_chunk_size"):  # Llama 4: RoPE layers chunked, NoPE layers global
        nope = config.get("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(n)]
        if len(nope) != n:
            raise InputError("model_config.no_rope_layers", f"must have {n} entries", "0 or 1")
        return tuple("chunked" if r else "full" for r in nope), None
    if window and config.get("max_window_layers") is not None and model_type.startswith("qwen"):
        first = _int(config, "max_window_layers")  # Qwen2: layers >= max_window_layers slide
        if first < n:
            return tuple("sliding" if i >= first else "full" for i in range(n)), None
        return None, None
    return None, None


def _only_if_mixed(mixers: tuple, window: int | None) -> tuple | None:
    uniform = ("sliding" if window else "full",) * len(mixers)
    return None if mixers == uniform else mixers


def moe_layer_fields(config: dict[str, Any], model_type: str, n: int) -> dict[str, Any]:
    """MoESpec's `layers` (or first_dense_layers / layer_freq) from the config's dialect;
    an explicit list only where the DeepSeek rule cannot say it."""
    fields = _moe_layers(config, model_type, n)
    if fields.get("layers") == tuple(range(n)):
        return {"first_dense_layers": 0, "layer_freq": 1}
    return fields


def _moe_layers(config: dict[str, Any], model_type: str, n: int) -> dict[str, Any]:
    if "expert_layer_period" in config:  # Jamba
        moe = _periodic(n, _int(config, "expert_layer_period"),
                        _int(config, "expert_layer_offset", 0))
        return {"layers": tuple(i for i in range(n) if moe[i])}
    if model_type.startswith("llama4") or "interleave_moe_layer_step" in config:
        if config.get("moe_layers") is not None:
            return {"layers": tuple(int(i) for i in config["moe_layers"])}
        step = _int(config, "interleave_moe_layer_step", 1)  # configuration_llama4.py
        return {"layers": tuple(range(step - 1, n, step))}
    if isinstance(config.get("moe_layer_freq"), list):  # one 0/1 flag a layer (MiniMax-M3)
        flags = config["moe_layer_freq"]
        if len(flags) != n:
            raise InputError("model_config.moe_layer_freq", f"must have {n} entries", "0 or 1")
        return {"layers": tuple(i for i, f in enumerate(flags) if f)}
    if "mlp_only_layers" in config or "decoder_sparse_step" in config:  # Qwen2/3-MoE
        dense = set(config.get("mlp_only_layers") or [])
        step = _int(config, "decoder_sparse_step", 1) or 1
        return {"layers": tuple(i for i in range(n) if i not in dense and (i + 1) % step == 0)}
    return {"first_dense_layers": config.get("first_k_dense_replace") or 0,
            "layer_freq": config.get("moe_layer_freq") or 1}


# Keys of architectures perfcast does not model: refused by name, never priced as another.
UNMODELLED = {
    "block_configs": "heterogeneous per-layer blocks (Nemotron NAS models)",
    "blocksparse_block_size": "block-sparse attention (Phi-3-small)",
    "dense_attention_every_n_layers": "block-sparse attention (Phi-3-small)",
    "cross_attention_layers": "interleaved cross-attention layers (Llama 3.2 Vision)",
    "compress_ratios": "compressed sparse attention (DeepSeek-V4)",
    "hc_mult": "hyper-connections (DeepSeek-V4)",
    "routed_expert_hidden_size": "latent MoE: experts on a narrower projection (Kimi-K3)",
    "attn_res_block_size": "attention residuals over layer blocks (Kimi-K3)",
}


def refuse_unmodelled(config: dict[str, Any]) -> None:
    for key, what in UNMODELLED.items():
        if config.get(key) is not None:
            raise InputError(f"model_config.{key}", f"{what} is not modelled",
                             "a decoder whose layers perfcast can price")


def linear_mixer_fields(config: dict[str, Any], model_type: str,
                        heads: int, head_dim: int, hidden: int) -> dict[str, Any]:
    """LinearMixerSpec fields of a hybrid model's recurrent layers."""
    lin = config.get("linear_attn_config")
    if isinstance(lin, dict) and lin.get("kda_layers"):  # Kimi Delta Attention (a gated
        k = _int(lin, "num_heads")  # DeltaNet with channel-wise gates): q, k, v heads alike
        d = _int(lin, "head_dim")
        return {"kind": "kda", "key_heads": k, "key_head_dim": d, "value_heads": k,
                "value_head_dim": d, "conv_kernel": _int(lin, "short_conv_kernel_size", 4)}
    if "linear_num_value_heads" in config:  # Qwen3-Next / Qwen3.5 Gated DeltaNet
        return {"kind": "gated-deltanet",
                "key_heads": _int(config, "linear_num_key_heads"),
                "key_head_dim": _int(config, "linear_key_head_dim"),
                "value_heads": _int(config, "linear_num_value_heads"),
                "value_head_dim": _int(config, "linear_value_head_dim"),
                "conv_kernel": _int(config, "linear_conv_kernel_dim", 4)}
    if "mamba_num_heads" in config:  # Mamba2 (Nemotron-H): heads x head_dim, groups x state
        return {"kind": "mamba2", "key_heads": _int(config, "n_groups", 1),
                "key_head_dim": _int(config, "ssm_state_size"),
                "value_heads": _int(config, "mamba_num_heads"),
                "value_head_dim": _int(config, "mamba_head_dim"),
                "conv_kernel": _int(config, "conv_kernel", 4)}
    if "mamba_d_state" in config:  # Jamba's Mamba1: d_inner channels, each a d_state state
        inner = _int(config, "mamba_expand", 2) * hidden
        return {"kind": "mamba1", "key_heads": 1, "key_head_dim": _int(config, "mamba_d_state"),
                "value_heads": inner, "value_head_dim": 1,
                "conv_kernel": _int(config, "mamba_d_conv", 4)}
    if "attn_type_list" in config:  # MiniMax lightning attention: softmax-free, same heads
        return {"kind": "lightning", "key_heads": heads, "key_head_dim": head_dim,
                "value_heads": heads, "value_head_dim": head_dim}
    raise InputError("model_config.layer_types", f"{model_type or 'this config'} has "
                     "linear/mamba layers but none of the keys that size them "
                     "(linear_num_value_heads, mamba_num_heads, mamba_d_state)",
                     "a config with its recurrent layers' sizes")


def sparse_fields(config: dict[str, Any]) -> dict[str, Any] | None:
    """SparseAttentionSpec fields (DeepSeek-V3.2 `index_*` keys), or None."""
    if not config.get("index_topk"):
        return None
    return {"top_k": _int(config, "index_topk"), "indexer_heads": _int(config, "index_n_heads"),
            "indexer_head_dim": _int(config, "index_head_dim")}
