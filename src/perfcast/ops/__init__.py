"""Workload phases as operator tables: FLOPs, bytes, shapes and collectives per kernel."""

from perfcast import _lazy_exports

# Submodule -> the public names it provides, each imported on first use (PEP 562).
_EXPORTS = {
    "_batch": ("Batch", "attended_keys"),
    "_cnn": ("CNN_MODELS", "cnn_ops"),
    "_diffusion": ("unet_ops", "weight_params"),
    "_diffusion_parts": ("scheduler_ops", "text_encoder_ops", "vae_decode_ops"),
    "_eager": ("EAGER_ATTENTION", "EAGER_LOGITS", "EAGER_MODES", "OPTIMIZERS", "eager_ops"),
    "_eager_batch": ("eager_batch_ops",),
    "_fusion": ("FUSION_RULES",),
    "_loss": ("loss_peak_bytes_per_logit", "loss_rows"),
    "_memory": ("MemoryFootprint", "inference_memory", "kv_bytes_per_token",
        "state_bytes_per_sequence", "weight_bytes_per_gpu"),
    "_retrieval": ("INDEX_KINDS", "VectorIndex", "embed_ops", "search_ops"),
    "_table": ("COLUMNS", "COMM_FAMILIES", "FUSED_QUANT", "OpRows", "TENSOR_FAMILIES"),
    "_training": ("training_ops",),
    "_transformer": ("layer_name", "step_ops", "step_rows"),
}
__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)

__all__ = [name for names in _EXPORTS.values() for name in names]  # pinned: tests
