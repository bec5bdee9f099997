"""Map a HuggingFace config.json onto ModelSpec fields, across the common model_type dialects."""

from __future__ import annotations

from typing import Any

from perfcast.errors import InputError
from perfcast.specs._hf_layers import (
    layer_pattern,
    linear_mixer_fields,
    moe_layer_fields,
    refuse_unmodelled,
    sparse_fields,
)
from perfcast.specs._model import MoESpec
from perfcast.specs._vision import vision_fields

__all__ = ["KNOWN_TYPES", "spec_fields"]

_GATED_TYPES = {
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "deepseek_v2",
    "deepseek_v3", "gemma", "gemma2", "phi3", "internlm", "internlm2", "olmo", "olmo2",
}
# transformers' class defaults for diff-serialised text_config sections: LlamaConfig
# (configuration_llama.py) and Gemma3TextConfig (configuration_gemma3.py).
_TEXT_DEFAULTS = {"llama": {
    "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "hidden_act": "silu", "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "vocab_size": 32000,
}, "gemma3_text": {
    "vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216,
    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
    "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 131_072, "rms_norm_eps": 1e-6, "rope_theta": 1_000_000.0,
    "sliding_window": 4096, "sliding_window_pattern": 6, "tie_word_embeddings": True,
}}
_ENCODER_TYPES = {"bert", "roberta", "deberta", "deberta-v2", "electra"}
_GATED_TYPES |= {
    "deepseek", "chatglm", "kimi_linear", "qwen3_vl_text", "qwen2_5_vl", "qwen3_vl",
    "qwen3_vl_moe", "glm4_moe_lite", "qwen3_5_text", "llama4", "llama4_text", "qwen3_next",
    "qwen3_5", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_vl_moe_text", "deepseek_v32",
    "kimi_k2", "glm", "glm4", "glm4_moe", "glm_moe_dsa", "gemma3", "gemma3_text", "phimoe",
    "gpt_oss", "minimax", "minimax_m1", "minimax_m2", "jamba", "cohere", "cohere2", "olmoe",
    "granite", "granitemoe", "ernie4_5", "ernie4_5_moe", "dbrx", "hunyuan_v1_moe", "exaone",
    "yi", "baichuan", "bailing_moe",
}
_PLAIN_MLP_TYPES = {"gpt2", "gpt_neo", "gpt_neox", "gptj", "opt", "phi", "falcon", "starcoder2",
                    "nemotron", "nemotron_h", "bloom", "gpt_bigcode", "codegen"}
_RMS_TYPES = {"gpt_oss", "gemma", "gemma2", "gemma3", "gemma3_text", "nemotron_h", "dbrx"}
_LEARNED_POS_TYPES = {"gpt2", "opt", "gptj", "gpt_neo", "gpt_bigcode"}
_ALIBI_TYPES = {"bloom"}
_FOUR_H_TYPES = {"gpt2", "gpt_neo", "gptj", "falcon", "bloom", "gpt_bigcode", "codegen"}
# hidden_act where the class default is not silu (configuration_*.py; Falcon's MLP hard-codes
# GELU in modeling_falcon.py)
_ACT_DEFAULTS = {"gemma": "gelu_pytorch_tanh", "gemma2": "gelu_pytorch_tanh",
                 "gemma3": "gelu_pytorch_tanh", "gemma3_text": "gelu_pytorch_tanh",
                 "falcon": "gelu", "gpt2": "gelu_new", "opt": "relu", "bert": "gelu",
                 "nemotron": "relu2", "nemotron_h": "relu2", "starcoder2": "gelu_pytorch_tanh"}
# tie_word_embeddings' class default is True (PretrainedConfig's) for these
_TIED_TYPES = {"gpt2", "opt", "gemma", "gemma2", "gemma3", "gemma3_text", "falcon"} | _ENCODER_TYPES
# model_types whose modelling code the readers below follow; anything else is read only
# where every feature is named by a key (see _Reader).
KNOWN_TYPES = (_GATED_TYPES | _PLAIN_MLP_TYPES | _ENCODER_TYPES | _RMS_TYPES
               | {"switch_transformers", "mpt", "vit", "llava", "mamba", "falcon_mamba"})


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


# mamba_ssm's Mamba2 module defaults (mamba_ssm/modules/mamba2.py), for its MambaConfig files
_MAMBA2_DEFAULTS = {"d_state": 128, "headdim": 64, "expand": 2, "ngroups": 1, "d_conv": 4}


def _mamba_fields(config: dict[str, Any], model_type: str) -> dict[str, Any]:
    """Attention-free SSM language models: HF MambaConfig / FalconMambaConfig (Mamba1 blocks:
    in_proj to 2 x intermediate, conv, selective scan of state_size per channel) and
    mamba_ssm's MambaConfig (d_model, n_layer, ssm_cfg; Mamba2 blocks by default). Every
    layer is a mixer with no FFN (d_intermediate 0); no positions, RMSNorm."""
    ssm = _section(config, "ssm_cfg") or {}
    if model_type in ("mamba", "falcon_mamba"):
        hidden, layers = config["hidden_size"], config["num_hidden_layers"]
        inner = config.get("intermediate_size") or config.get("expand", 2) * hidden
        mixer = {"kind": "mamba1", "key_heads": 1, "key_head_dim": config["state_size"],
                 "value_heads": inner, "value_head_dim": 1,
                 "conv_kernel": config.get("conv_kernel", 4)}
        # no attention: "heads" are the d_inner channels TP splits (head_dim 1)
        heads, head_dim, tied = inner, 1, config.get("tie_word_embeddings", True)
    else:
        hidden, layers = config["d_model"], config["n_layer"]
        if ssm.get("layer", "Mamba1") != "Mamba2" or config.get("attn_layer_idx") or config.get(
                "d_intermediate"):
            raise InputError("model_config.ssm_cfg", "mamba_ssm configs are read for pure "
                             "Mamba2 stacks (no attention layers, d_intermediate 0)",
                             "ssm_cfg.layer Mamba2")
        m2 = {**_MAMBA2_DEFAULTS, **ssm}
        inner = m2["expand"] * hidden
        heads, head_dim = inner // m2["headdim"], m2["headdim"]
        mixer = {"kind": "mamba2", "key_heads": m2["ngroups"], "key_head_dim": m2["d_state"],
                 "value_heads": heads, "value_head_dim": head_dim, "conv_kernel": m2["d_conv"]}
        tied = config.get("tie_embeddings", True)
    return {"kind": "decoder", "hidden_size": hidden, "num_layers": layers,
            "num_heads": heads, "num_kv_heads": heads, "head_dim": head_dim,
            "intermediate_size": inner, "vocab_size": _first(config, "vocab_size"),
            "activation": "silu", "norm": "rmsnorm", "position": "relative",
            "tied_embeddings": bool(tied), "layer_mixers": ("mamba",) * layers,
            "layer_ffns": ("none",) * layers, "linear_mixer": mixer}


def _dbrx_fields(config: dict[str, Any]) -> dict[str, Any]:
    """DBRX (transformers DbrxConfig): MPT-style keys with nested attn_config (GQA over
    kv_n_heads, RoPE) and ffn_config (every layer MoE: moe_num_experts gated-SiLU experts of
    ffn_hidden_size, top moe_top_k); LayerNorm without bias, untied embeddings."""
    attn, ffn = _section(config, "attn_config") or {}, _section(config, "ffn_config") or {}
    d_model, heads = _first(config, "d_model"), _first(config, "n_heads")
    for section, key in (("attn_config", "kv_n_heads"), ("ffn_config", "ffn_hidden_size"),
                         ("ffn_config", "moe_num_experts"), ("ffn_config", "moe_top_k")):
        if not (attn if section == "attn_config" else ffn).get(key):
            raise InputError(f"model_config.{section}.{key}", "missing: DBRX needs it",
                             "a positive integer")
    inter = ffn["ffn_hidden_size"]
    act = (ffn.get("ffn_act_fn") or {}).get("name", "silu")
    return {"kind": "decoder", "hidden_size": d_model, "num_layers": _first(config, "n_layers"),
            "num_heads": heads, "num_kv_heads": attn["kv_n_heads"], "head_dim": d_model // heads,
            "intermediate_size": inter, "vocab_size": _first(config, "vocab_size"),
            "max_position_embeddings": config.get("max_seq_len"), "gated_mlp": True,
            "activation": act, "norm": "layernorm", "position": "rope",
            "tied_embeddings": bool(config.get("tie_word_embeddings", False)),
            "moe": {"num_experts": ffn["moe_num_experts"], "experts_per_token": ffn["moe_top_k"],
                    "expert_intermediate_size": inter}}


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


def _unwrap(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the language model's config, the multimodal wrapper or None). Wrappers (LLaVA,
    Gemma 3, Llama 4, Kimi-K2.5, Qwen3.5) nest the LM under text_config; HF serialises it as a
    diff against the class defaults, restored here for the types whose defaults we ship."""
    if "text_config" not in config or "hidden_size" in config:
        return config, None
    text = _section(config, "text_config") or {}
    _section(config, "vision_config")
    shared = {k: config[k] for k in ("tie_word_embeddings",) if k in config}
    return {**_TEXT_DEFAULTS.get(text.get("model_type"), {}), **shared, **text}, config


def spec_fields(config: dict[str, Any]) -> dict[str, Any]:
    """ModelSpec keyword arguments from a parsed config.json."""
    config, wrapper = _unwrap(config)
    model_type = str(config.get("model_type", "")).lower()
    if model_type == "switch_transformers":
        return {**_switch_fields(config), "model_type": model_type}
    if model_type == "mpt":
        return {**_mpt_fields(config), "model_type": model_type}
    if model_type == "vit":
        return {**_vit_fields(config), "model_type": model_type}
    if model_type == "dbrx":
        return {**_dbrx_fields(config), "model_type": model_type}
    if model_type in ("mamba", "falcon_mamba") or (not model_type and "ssm_cfg" in config):
        return {**_mamba_fields(config, model_type), "model_type": model_type or "mamba_ssm"}
    refuse_unmodelled(config)
    fields = _Reader(config, model_type).decoder_fields()
    vision_config = (wrapper or {}).get("vision_config") is not None
    if vision_config or config.get("vision_config") is not None:
        fields["vision"] = _vision_or_none(wrapper or config, fields)
    return fields


def _vision_or_none(wrapper: dict[str, Any], fields: dict[str, Any]) -> Any:
    """The CLIP tower of LLaVA-style wrappers; other towers (SigLIP, MoonViT, Qwen-VL's ...)
    are not priced, and the spec says so in `inferred` instead of guessing their shapes."""
    raw = wrapper.get("vision_config") or {}
    vtype = raw.get("model_type") or ("clip_vision_model" if wrapper.get("model_type") == "llava"
                                      else "unnamed")
    vision = None
    if vtype == "clip_vision_model":
        vision = vision_fields(wrapper, fields["hidden_size"])
    if vision is None:
        fields["inferred"] = (*fields["inferred"], f"vision tower ({vtype}) not priced: only "
                              "the language model is")
    return vision


class _Reader:
    """Reads a decoder-only config into ModelSpec fields. Known model_types follow their
    transformers modelling file; an unknown type is read only where every needed feature is
    named by a key, and each feature taken by inference is listed in `inferred`."""

    def __init__(self, config: dict[str, Any], model_type: str):
        self.c, self.type = config, model_type
        self.known = model_type in KNOWN_TYPES
        self.inferred: list[str] = []

    def need(self, *keys: str, what: str) -> Any:
        """The first key present; a present null or no key at all is an error naming it."""
        for key in keys:
            if key in self.c:
                if self.c[key] is None:
                    raise InputError(f"model_config.{key}", f"is null, but {what} needs it",
                                     "a positive integer")
                return self.c[key]
        raise InputError(f"model_config.{keys[0]}", f"missing: {what} needs "
                         + " or ".join(keys), "a HuggingFace config.json of a transformer")

    def opt(self, *keys: str, default: Any = None, note: str | None = None) -> Any:
        for key in keys:
            if self.c.get(key) is not None:
                return self.c[key]
        if note and not self.known:
            self.inferred.append(note)
        return default

    def decoder_fields(self) -> dict[str, Any]:
        c, t = self.c, self.type
        hidden = self.need("hidden_size", "n_embd", "d_model", what="the model width")
        heads = self.need("num_attention_heads", "n_head", "num_heads", what="attention")
        layers = self.need("num_hidden_layers", "n_layer", "num_layers", what="the depth")
        kv_heads = self.opt("num_key_value_heads", "num_kv_heads", "multi_query_group_num",
                            default=heads, note="multi-head attention (no num_key_value_heads)")
        if c.get("multi_query") and not c.get("new_decoder_architecture"):
            kv_heads = 1  # Falcon-7B's MQA (modeling_falcon.py), whatever num_kv_heads says
        mla = _mla_fields(c)
        head_dim = self.opt("head_dim", "kv_channels", default=None) or hidden // heads
        if mla:
            head_dim = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]
        act = self.opt("hidden_activation", "hidden_act", "activation_function")
        if act is None and t == "chatglm":
            act = "swiglu"  # ChatGLM's MLP: dense_h_to_4h -> swiglu (modeling_chatglm.py)
        act = str(act if act is not None else self._default_act())
        moe = self._moe(layers)
        intermediate = self._intermediate(hidden, moe, layers)
        window = c.get("sliding_window") if c.get("use_sliding_window", True) else None
        mixers, ffns = layer_pattern(c, t, layers, window)
        kinds = set(mixers or ())
        return {
            "model_type": t,
            "kind": "encoder" if t in _ENCODER_TYPES else "decoder",
            "hidden_size": hidden,
            "num_layers": layers,
            "num_heads": heads,
            "num_kv_heads": kv_heads,
            "head_dim": head_dim,
            "intermediate_size": intermediate,
            "vocab_size": self.need("vocab_size", "padded_vocab_size",
                                    what="the embedding and LM head"),
            "max_position_embeddings": self.opt("max_position_embeddings", "n_positions",
                                                "seq_length", "model_max_length",
                                                default=0) or None,
            "gated_mlp": self._gated(act),
            "activation": act,
            "norm": self._norm(),
            "position": self._position(),
            "tied_embeddings": bool(self.opt(
                "tie_word_embeddings", default=t in _TIED_TYPES,
                note="untied embeddings (no tie_word_embeddings)")),
            "sliding_window": window if window and (mixers is None or kinds & {"sliding"})
            else None,
            "attention_bias": bool(c.get("attention_bias", c.get("qkv_bias", c.get(
                "add_qkv_bias", t in {
                "qwen2", "gpt2", "gpt_oss"})))),
            "moe": moe,
            "mla": mla,
            "layer_mixers": mixers,
            "layer_ffns": ffns,
            "linear_mixer": linear_mixer_fields(c, t, heads, head_dim, hidden)
            if kinds & {"linear", "mamba"} else None,
            "sparse_attention": sparse_fields(c),
            "attention_chunk": c.get("attention_chunk_size") if "chunked" in kinds else None,
            "attention_sinks": t == "gpt_oss" or bool(c.get("attention_sink")),
            "inferred": tuple(self.inferred),
        }

    def _default_act(self) -> str:
        """A missing activation: the class default of a known type (the gated LLM configs'
        silu, Gemma's tanh GELU, Falcon's hard-coded GELU), else an error naming the key."""
        if self.type in _ACT_DEFAULTS:
            return _ACT_DEFAULTS[self.type]
        if self.type in _GATED_TYPES:
            return "silu"
        known = "is not one perfcast knows" if not self.known else "has no default perfcast ships"
        raise InputError("model_config.hidden_act", f"missing, and model_type {self.type!r} "
                         f"{known}, so the MLP's activation is unknown",
                         "silu, gelu, gelu_pytorch_tanh, relu2, ...")

    def _intermediate(self, hidden: int, moe: dict | None, layers: int) -> int:
        """Dense FFN width. GPT-2-style configs define a null n_inner as 4 x hidden
        (modeling_gpt2.py); a null intermediate_size is an error, never a default, unless
        every layer is MoE (the dense width is then never used)."""
        c = self.c
        rule = MoESpec(**moe) if moe else None
        all_moe = rule is not None and all(rule.covers(i) for i in range(layers))
        if "intermediate_size_mlp" in c:  # Llama 4: intermediate_size is the experts'
            return self.need("intermediate_size_mlp", what="the dense FFN")
        for key in ("ffn_hidden_size", "intermediate_size", "ffn_dim", "d_ff"):
            if key in c:
                if c[key] is None and not all_moe:
                    raise InputError(f"model_config.{key}", "is null, but the dense FFN "
                                     "needs it", "a positive integer")
                if c[key] is not None:
                    return c[key]
        if c.get("n_inner") is not None:
            return c["n_inner"]
        if self.type in _FOUR_H_TYPES or "n_inner" in c:
            return 4 * hidden
        if all_moe:
            return moe["expert_intermediate_size"]
        raise InputError("model_config.intermediate_size", "missing: the dense FFN needs it",
                         "a positive integer")

    def _moe(self, layers: int) -> dict[str, Any] | None:
        c = self.c
        experts = self.opt("n_routed_experts", "num_local_experts", "num_experts",
                           "moe_num_experts")
        if not experts or experts <= 1:
            return None
        inter = self.opt("moe_intermediate_size", "expert_intermediate_size")
        if inter is None:
            inter = self.need("intermediate_size", what="the experts' FFN")
        shared = c.get("n_shared_experts") or c.get("num_shared_experts") or 0
        shared_width = c.get("shared_expert_intermediate_size")
        if self.type.startswith("llama4"):
            shared, shared_width = 1, None  # one shared expert of the experts' width
        return {
            "num_experts": experts,
            "experts_per_token": self.need("num_experts_per_tok", "experts_per_token",
                                           "moe_top_k", "num_experts_per_token",
                                           what="expert routing (top-k)"),
            "expert_intermediate_size": inter,
            "num_shared_experts": 1 if shared_width and not shared else shared,
            "shared_expert_intermediate_size": shared_width or None,
            **moe_layer_fields(c, self.type, layers),
        }

    def _gated(self, act: str) -> bool:
        if self.type in _GATED_TYPES:
            return True
        if self.type in _PLAIN_MLP_TYPES or self.type in _ENCODER_TYPES:
            return False
        gated = act in {"silu", "swiglu", "swish", "swigluoai"}
        if not self.known:
            self.inferred.append(f"{'gated' if gated else 'plain'} MLP (from hidden_act "
                                 f"{act!r})")
        return gated

    def _norm(self) -> str:
        if "rms_norm_eps" in self.c or self.type in _RMS_TYPES or self.c.get("rmsnorm"):
            return "rmsnorm"
        if self.known or any(k in self.c for k in (
                "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon", "norm_eps",
                "layernorm_epsilon")):
            return "layernorm"
        raise InputError("model_config.rms_norm_eps", f"missing, and model_type {self.type!r} "
                         "is not one perfcast knows, so the norm is unknown",
                         "rms_norm_eps (RMSNorm) or layer_norm_eps (LayerNorm)")

    def _position(self) -> str:
        t, c = self.type, self.c
        if t in _LEARNED_POS_TYPES or t in _ENCODER_TYPES:
            return "learned"
        if t in _ALIBI_TYPES or c.get("alibi"):
            return "relative"
        if self.known or any(k in c for k in ("rope_theta", "rope_scaling", "rotary_dim",
                                              "rotary_emb_base", "partial_rotary_factor")):
            return "rope"
        if "n_positions" in c:
            self.inferred.append("learned positions (n_positions, no rope keys)")
            return "learned"
        raise InputError("model_config.rope_theta", f"missing, and model_type {self.type!r} "
                         "is not one perfcast knows, so the position encoding is unknown",
                         "rope_theta / rope_scaling (RoPE) or n_positions (learned)")
