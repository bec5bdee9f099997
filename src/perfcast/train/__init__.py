"""Training iterations at any scale: data, tensor, sequence, context, pipeline and expert
parallelism, ZeRO/FSDP, pipeline schedules, recomputation, FP8 and LoRA; time per
iteration with its breakdown, memory per GPU, MFU; the plan search; RLHF PPO steps.

Each micro-batch's forward and backward is a step composed by `perfcast.compose`
(`compose.training_step`); this package adds the pipeline schedule, the collectives in
their groups, the gradient reduction (`compose.reduction_end`), the optimizer and memory."""

from perfcast import _lazy_exports

# Submodule -> the public names it provides, each imported on first use (PEP 562).
_EXPORTS = {
    "_cnn": ("CNNTrainForecast", "cnn_training_ops", "forecast_cnn_training"),
    "_engine": ("PipelineTasks", "pipeline_tasks"),
    "_forecast": ("FLOP_CONVENTION", "ITERATION_PARTS", "TrainForecast", "default_time_model",
        "forecast_training", "iteration_parts", "mfu_ceiling"),
    "_job": ("RECOMPUTE", "TrainJob", "training_precision"),
    "_memory": ("MemoryBudget", "activation_bytes_per_layer", "eager_step_memory",
        "state_bytes_per_param"),
    "_memory_policy": ("DEFAULT_MEMORY_POLICY", "MEMORY_POLICIES", "TrainingMemoryPolicy",
        "memory_policy"),
    "_overlap": ("OVERLAP_PARTS", "CommOverlap"),
    "_rlhf": ("RLHFForecast", "rlhf_step"),
    "_scale": ("SCALE_PARTS", "ScaleEffects"),
    "_schedule": ("build_schedule", "simulate"),
    "_stack": ("ATTENTION_FAMILIES", "LEGACY_ATTENTION", "STACKS", "StackScaled",
        "attention_penalty", "load_stack", "stack_overlap", "stack_time_model"),
    "_sweep": ("SWEEP_COLUMNS", "sweep_plans"),
}
__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)

__all__ = [name for names in _EXPORTS.values() for name in names]  # pinned: tests
