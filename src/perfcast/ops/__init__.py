"""Workload phases as operator tables: FLOPs, bytes, shapes and collectives per kernel."""

from perfcast.ops._batch import Batch, attended_keys
from perfcast.ops._cnn import CNN_MODELS, cnn_ops
from perfcast.ops._diffusion import unet_ops, weight_params
from perfcast.ops._diffusion_parts import scheduler_ops, text_encoder_ops, vae_decode_ops
from perfcast.ops._eager import EAGER_ATTENTION, EAGER_LOGITS, EAGER_MODES, OPTIMIZERS, eager_ops
from perfcast.ops._eager_batch import eager_batch_ops
from perfcast.ops._fusion import FUSION_RULES
from perfcast.ops._memory import (
    MemoryFootprint,
    inference_memory,
    kv_bytes_per_token,
    state_bytes_per_sequence,
    weight_bytes_per_gpu,
)
from perfcast.ops._retrieval import INDEX_KINDS, VectorIndex, embed_ops, search_ops
from perfcast.ops._table import COLUMNS, COMM_FAMILIES, FUSED_QUANT, TENSOR_FAMILIES
from perfcast.ops._training import training_ops
from perfcast.ops._transformer import layer_name, step_ops

__all__ = [
    "CNN_MODELS", "COLUMNS", "COMM_FAMILIES", "EAGER_ATTENTION", "EAGER_LOGITS", "EAGER_MODES",
    "FUSED_QUANT", "FUSION_RULES",
    "OPTIMIZERS", "TENSOR_FAMILIES",
    "Batch", "MemoryFootprint", "attended_keys", "cnn_ops", "eager_batch_ops", "eager_ops",
    "inference_memory",
    "kv_bytes_per_token", "layer_name", "state_bytes_per_sequence", "step_ops",
    "training_ops", "weight_bytes_per_gpu",
    "scheduler_ops", "text_encoder_ops", "unet_ops", "vae_decode_ops", "weight_params",
    "INDEX_KINDS", "VectorIndex", "embed_ops", "search_ops",
]
